package cdn

import (
	"hash/maphash"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Object is one stored response. It is immutable once stored.
type Object struct {
	Key string
	// Host and Path (no query) are what invalidation matches.
	Host, Path string
	Status     int
	// Header is the origin's header, hop-by-hop fields removed, without
	// Age and Cache-Status (added when served).
	Header http.Header
	Body   []byte
	// Date is when the origin made the response: the time it arrived
	// less the Age it arrived with. Age and freshness count from it.
	Date time.Time
	// TTL is the freshness lifetime; SWR and SIE the stale-while-
	// revalidate and stale-if-error windows past it.
	TTL, SWR, SIE time.Duration
	// ClientCC replaces Cache-Control towards clients when not "".
	ClientCC string
	// Vary lists the request headers the response varies on. A marker
	// (Marker true) stands at the primary key of a response with Vary
	// and says which headers make the variant's key; Variants are the
	// keys of the variants stored behind it, oldest first, at most
	// MaxVariants.
	Vary     []string
	Marker   bool
	Variants []string

	// cc and clen are the Cache-Control (ClientCC) and Content-Length
	// values served with the object, made once by prepare so that a hit
	// does not allocate them; nil until then.
	cc, clen []string
}

// prepare makes the header values a hit serves; it is called before
// the object is shared.
func (o *Object) prepare() *Object {
	if o.ClientCC != "" {
		o.cc = []string{o.ClientCC}
	}
	o.clen = []string{strconv.Itoa(len(o.Body))}
	return o
}

// size is what the object counts against the store's bound: body,
// header and key, plus a fixed overhead.
func (o *Object) size() int64 {
	n := int64(len(o.Body) + len(o.Key) + len(o.Host) + len(o.Path) + len(o.ClientCC) + 256)
	for _, v := range o.Variants {
		n += int64(len(v)) + 16
	}
	for k, vv := range o.Header {
		n += int64(len(k)) + 32
		for _, v := range vv {
			n += int64(len(v)) + 16
		}
	}
	return n
}

// age returns the object's age at now.
func (o *Object) age(now time.Time) time.Duration {
	if a := now.Sub(o.Date); a > 0 {
		return a
	}
	return 0
}

// Store is the bounded in-memory tier: S3-FIFO (Yang et al., SOSP
// 2023). New objects enter a small FIFO queue (10% of the bytes); those
// read again before they reach its end move to the main queue, the others
// leave and are remembered (key hash only) in a ghost queue, so that an
// object that comes back soon enters main directly. Main is a FIFO with
// reinsertion (CLOCK with a 2-bit counter). A hit is a map read under a
// read lock and one atomic add: no list is touched, unlike LRU, and
// one-hit objects (scans, Vary and query-string floods) never push out
// the objects that are read again.
type Store struct {
	mu          sync.RWMutex
	m           map[string]*entry
	small, main queue
	capacity    int64
	smallCap    int64
	bytes       int64
	ghost       ghost
	seed        maphash.Seed

	hits, misses, evictions atomic.Uint64
}

type entry struct {
	key        string
	obj        *Object
	size       int64
	freq       atomic.Int32
	inMain     bool
	prev, next *entry
}

// queue is a doubly linked FIFO: push at head, pop at tail.
type queue struct {
	head, tail *entry
	bytes      int64
}

func (q *queue) push(e *entry) {
	e.prev, e.next = nil, q.head
	if q.head != nil {
		q.head.prev = e
	}
	q.head = e
	if q.tail == nil {
		q.tail = e
	}
	q.bytes += e.size
}

func (q *queue) remove(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		q.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		q.tail = e.prev
	}
	e.prev, e.next = nil, nil
	q.bytes -= e.size
}

// ghost remembers the hashes of keys recently evicted from the small
// queue, in a fixed ring.
type ghost struct {
	set  map[uint64]struct{}
	ring []uint64
	pos  int
}

func (g *ghost) add(h uint64) {
	if old := g.ring[g.pos]; old != 0 {
		delete(g.set, old)
	}
	g.ring[g.pos] = h
	g.set[h] = struct{}{}
	g.pos = (g.pos + 1) % len(g.ring)
}

// NewStore returns a store bounded to capacity bytes.
func NewStore(capacity int64) *Store {
	n := int(capacity / 4096)
	n = min(max(n, 1024), 1<<20)
	return &Store{
		m:        map[string]*entry{},
		capacity: capacity,
		smallCap: capacity / 10,
		ghost:    ghost{set: make(map[uint64]struct{}, n), ring: make([]uint64, n)},
		seed:     maphash.MakeSeed(),
	}
}

// Get returns the object stored under key, nil when none.
func (s *Store) Get(key string) *Object {
	s.mu.RLock()
	e := s.m[key]
	s.mu.RUnlock()
	if e == nil {
		s.misses.Add(1)
		return nil
	}
	if e.freq.Load() < 3 {
		e.freq.Add(1)
	}
	s.hits.Add(1)
	return e.obj
}

// Put stores o under key, replacing what was there. An object larger
// than a tenth of the store is not kept (it would flush the small
// queue). It reports whether o was stored.
func (s *Store) Put(key string, o *Object) bool {
	size := o.size()
	if size > s.smallCap {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.m[key]; e != nil {
		s.unlink(e)
	}
	e := &entry{key: key, obj: o, size: size}
	h := maphash.String(s.seed, key) | 1
	if _, seen := s.ghost.set[h]; seen {
		delete(s.ghost.set, h)
		e.inMain = true
		s.main.push(e)
	} else {
		s.small.push(e)
	}
	s.m[key] = e
	s.bytes += size
	for s.bytes > s.capacity {
		s.evict()
	}
	return true
}

// evict frees one object's worth (or moves one object to main).
func (s *Store) evict() {
	if s.small.bytes > s.smallCap || s.main.tail == nil {
		e := s.small.tail
		s.small.remove(e)
		if e.freq.Load() > 0 {
			e.freq.Store(0)
			e.inMain = true
			s.main.push(e)
			return
		}
		s.drop(e)
		s.ghost.add(maphash.String(s.seed, e.key) | 1)
		return
	}
	e := s.main.tail
	s.main.remove(e)
	if e.freq.Load() > 0 {
		e.freq.Add(-1)
		s.main.push(e)
		return
	}
	s.drop(e)
}

func (s *Store) drop(e *entry) {
	delete(s.m, e.key)
	s.bytes -= e.size
	s.evictions.Add(1)
}

// unlink removes e from its queue and the map (s.mu held).
func (s *Store) unlink(e *entry) {
	if e.inMain {
		s.main.remove(e)
	} else {
		s.small.remove(e)
	}
	delete(s.m, e.key)
	s.bytes -= e.size
}

// Delete removes the object under key.
func (s *Store) Delete(key string) {
	s.mu.Lock()
	if e := s.m[key]; e != nil {
		s.unlink(e)
	}
	s.mu.Unlock()
}

// DeleteMatching removes every object for which match is true and
// returns how many it removed.
func (s *Store) DeleteMatching(match func(*Object) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.m {
		if match(e.obj) {
			s.unlink(e)
			n++
		}
	}
	return n
}

// StoreStats are a store's counters.
type StoreStats struct {
	Objects                 int
	Bytes, Capacity         int64
	Hits, Misses, Evictions uint64
}

// Stats returns the store's counters.
func (s *Store) Stats() StoreStats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return StoreStats{Objects: len(s.m), Bytes: s.bytes, Capacity: s.capacity,
		Hits: s.hits.Load(), Misses: s.misses.Load(), Evictions: s.evictions.Load()}
}
