package cdn

import (
	"container/list"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"testing"
)

// lru is plain LRU by bytes, the baseline S3-FIFO is measured against.
type lru struct {
	ll       *list.List
	m        map[string]*list.Element
	bytes    int64
	capacity int64
}

type lruItem struct {
	key  string
	size int64
}

func newLRU(capacity int64) *lru {
	return &lru{ll: list.New(), m: map[string]*list.Element{}, capacity: capacity}
}

func (l *lru) get(k string) bool {
	if e, ok := l.m[k]; ok {
		l.ll.MoveToFront(e)
		return true
	}
	return false
}

func (l *lru) put(k string, size int64) {
	l.m[k] = l.ll.PushFront(&lruItem{k, size})
	l.bytes += size
	for l.bytes > l.capacity {
		e := l.ll.Back()
		it := e.Value.(*lruItem)
		l.ll.Remove(e)
		delete(l.m, it.key)
		l.bytes -= it.size
	}
}

// zipf draws ranks 0..n-1 with P(k) ∝ 1/(k+1)^alpha.
type zipf struct{ cdf []float64 }

func newZipf(n int, alpha float64) *zipf {
	z := &zipf{cdf: make([]float64, n)}
	sum := 0.0
	for k := range n {
		sum += 1 / math.Pow(float64(k+1), alpha)
		z.cdf[k] = sum
	}
	for k := range z.cdf {
		z.cdf[k] /= sum
	}
	return z
}

func (z *zipf) draw(r *rand.Rand) int { return sort.SearchFloat64s(z.cdf, r.Float64()) }

// hitRates replays a workload on S3-FIFO and LRU of the same byte
// capacity: every object has the same size, a miss fills.
func hitRates(keys []string, capacity int64) (s3, lr float64) {
	st := NewStore(capacity)
	l := newLRU(capacity)
	obj := &Object{Body: make([]byte, 1000)}
	var hs, hl int
	for _, k := range keys {
		if st.Get(k) != nil {
			hs++
		} else {
			o := *obj
			o.Key = k
			st.Put(k, &o)
		}
		if l.get(k) {
			hl++
		} else {
			o := *obj
			o.Key = k
			l.put(k, o.size())
		}
	}
	return float64(hs) / float64(len(keys)), float64(hl) / float64(len(keys))
}

// TestHitRateAgainstLRU measures S3-FIFO against plain LRU on Zipf
// workloads (alpha 0.8 and 1.0, 100,000 objects, caches of 1% and
// 10% of them), and on the same Zipf traffic mixed with a one-hit scan
// (a crawler, or a flood of unique query strings): S3-FIFO must not do
// worse than LRU on any, and must do better with the scan.
func TestHitRateAgainstLRU(t *testing.T) {
	const universe, n = 100_000, 500_000
	r := rand.New(rand.NewPCG(1, 2))
	objSize := (&Object{Body: make([]byte, 1000), Key: "k00000"}).size()
	for _, alpha := range []float64{0.8, 1.0} {
		z := newZipf(universe, alpha)
		plain := make([]string, n)
		scan := make([]string, n)
		for i := range n {
			plain[i] = "k" + strconv.Itoa(z.draw(r))
			if i%3 == 2 {
				scan[i] = "scan" + strconv.Itoa(i) // never seen again
			} else {
				scan[i] = plain[i]
			}
		}
		for _, frac := range []float64{0.01, 0.1} {
			capacity := int64(float64(universe)*frac) * objSize
			s3, l := hitRates(plain, capacity)
			t.Logf("zipf alpha=%.1f cache=%2.0f%%: S3-FIFO %.3f, LRU %.3f (%+.1f%%)", alpha, frac*100, s3, l, 100*(s3-l)/l)
			if s3 < l-0.005 {
				t.Errorf("S3-FIFO hit rate %.3f below LRU %.3f", s3, l)
			}
			s3, l = hitRates(scan, capacity)
			t.Logf("zipf alpha=%.1f cache=%2.0f%% + 1/3 scan: S3-FIFO %.3f, LRU %.3f (%+.1f%%)", alpha, frac*100, s3, l, 100*(s3-l)/l)
			if s3 <= l {
				t.Errorf("with a scan, S3-FIFO hit rate %.3f not above LRU %.3f", s3, l)
			}
		}
	}
}

func TestStoreBound(t *testing.T) {
	st := NewStore(1 << 20)
	for i := range 10_000 {
		st.Put("k"+strconv.Itoa(i), &Object{Key: "k" + strconv.Itoa(i), Body: make([]byte, i%5000)})
		if s := st.Stats(); s.Bytes > s.Capacity {
			t.Fatalf("store over its bound: %d > %d", s.Bytes, s.Capacity)
		}
	}
	if st.Put("huge", &Object{Body: make([]byte, 200<<10)}) {
		t.Error("an object over a tenth of the store was stored")
	}
	st.Put("a", &Object{Key: "a", Path: "/img/a"})
	st.Put("b", &Object{Key: "b", Path: "/css/b"})
	if n := st.DeleteMatching(func(o *Object) bool { return o.Path == "/img/a" }); n != 1 || st.Get("a") != nil || st.Get("b") == nil {
		t.Errorf("DeleteMatching removed %d", n)
	}
}
