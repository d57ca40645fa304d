package fleet_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
	"github.com/spillwaylb/spillway/internal/serve"
)

// countingOrigin answers every path with a cacheable body and counts the
// requests per path.
type countingOrigin struct {
	addr string
	mu   sync.Mutex
	n    map[string]int
}

func newCountingOrigin(t *testing.T) *countingOrigin {
	t.Helper()
	o := &countingOrigin{n: map[string]int{}}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.n[r.URL.Path]++
		o.mu.Unlock()
		w.Header().Set("Cache-Control", "public, max-age=3600")
		io.WriteString(w, "object "+r.URL.Path)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	o.addr = ln.Addr().String()
	return o
}

func (o *countingOrigin) count(path string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[path]
}

func cdnFleetConfig(origin string) string {
	host, port, _ := net.SplitHostPort(origin)
	return fmt.Sprintf(`networkEndpointGroups:
- {name: neg, zone: us-east1-b, endpoints: [{ipAddress: %s, port: %s}]}
backendServices:
- name: bs
  backends: [{group: neg, balancingMode: RATE, maxRatePerEndpoint: 100000}]
  enableCDN: true
  cdnPolicy: {cacheMode: USE_ORIGIN_HEADERS}
urlMaps:
- {name: um, defaultService: bs}
frontends:
- %s
`, host, port, httpFrontend)
}

// cacheGet fetches path through in and returns its Cache-Status. The
// Host is fixed: the cache key includes it, and a restarted instance
// listens on another port.
func cacheGet(t *testing.T, in *fullInstance, path string) string {
	t.Helper()
	cl := &http.Client{Timeout: 10 * time.Second}
	req, _ := http.NewRequest("GET", "http://"+in.srv.FrontendAddr("fe")+path, nil)
	req.Host = "cdn.test"
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "object "+path {
		t.Fatalf("%s via %s: %d %q", path, in.name, resp.StatusCode, b)
	}
	return resp.Header.Get("Cache-Status")
}

func isHit(status string) bool { return strings.Contains(status, "; hit") }

// invalidate asks in's admin API (what spillway cache invalidate does).
func invalidate(t *testing.T, in *fullInstance, path string) serve.InvalidateResponse {
	t.Helper()
	body, _ := json.Marshal(serve.InvalidateRequest{Path: path})
	resp, err := http.Post("http://"+in.srv.AdminAddr()+"/cache/invalidate", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out serve.InvalidateResponse
	if resp.StatusCode != 200 || json.Unmarshal(b, &out) != nil {
		t.Fatalf("invalidate %s via %s: %d %s", path, in.name, resp.StatusCode, b)
	}
	return out
}

// TestFleetCacheInvalidation: an invalidation asked of one instance
// reaches the other through etcd; an instance that was down applies on
// start the invalidations it missed (its disk tier keeps the rest), and
// clears its cache when the records it missed were already trimmed.
func TestFleetCacheInvalidation(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	st := fleet.NewStore(dial(t, e), "")
	origin := newCountingOrigin(t)
	push(t, st, cdnFleetConfig(origin.addr))
	dirs := map[string]string{"a": t.TempDir(), "b": t.TempDir()}
	start := func(name string) *fullInstance {
		return startFullInstanceWith(t, e, name, instanceTweaks{
			// Each instance its own disk tier (the fleet's config names one
			// path, which instances on one host would share).
			cfg:  func(c *config.Config) { c.Spillway = &config.Tuning{CDN: &config.CDN{DiskPath: dirs[name]}} },
			inst: func(o *fleet.InstanceOptions) { o.InvalidationHistory = 4 },
		})
	}
	a, b := start("a"), start("b")
	paths := []string{"/x/1", "/x/2", "/y"}
	for _, in := range []*fullInstance{a, b} {
		for _, p := range paths {
			cacheGet(t, in, p)
			if s := cacheGet(t, in, p); !isHit(s) {
				t.Fatalf("%s via %s: %q, want a hit", p, in.name, s)
			}
		}
	}

	// Live: invalidated through a, gone from b too; /y stays.
	if out := invalidate(t, a, "/x/*"); out.Removed != 4 || !out.Fleet {
		t.Fatalf("invalidate via a: %+v, want 4 removed (2 objects, in memory and on disk) and sent to the fleet", out)
	}
	eventually(t, "b drops /x/1 after a's invalidation", func() (bool, string) {
		s := cacheGet(t, b, "/x/1")
		return !isHit(s), s
	})
	if s := cacheGet(t, b, "/y"); !isHit(s) {
		t.Errorf("/y via b after invalidating /x/*: %q, want a hit", s)
	}
	if s := cacheGet(t, a, "/x/2"); isHit(s) {
		t.Errorf("/x/2 via a after invalidating /x/*: %q, want a miss", s)
	}

	// Down: b misses an invalidation of /y; on start it applies it
	// before its disk tier serves, and the tier still has /x/1.
	b.stop()
	invalidate(t, a, "/y")
	before := origin.count("/x/1")
	b = start("b")
	eventually(t, "b, restarted, caught up with the fleet's invalidations", func() (bool, string) {
		return b.inst.Cache().Applied() > 0, ""
	})
	if s := cacheGet(t, b, "/x/1"); !isHit(s) {
		t.Errorf("/x/1 via b after its restart: %q, want a hit from its disk tier", s)
	}
	if n := origin.count("/x/1"); n != before {
		t.Errorf("/x/1 reached the origin %d times after b's restart, want 0: the disk tier was not kept", n-before)
	}
	if s := cacheGet(t, b, "/y"); isHit(s) {
		t.Errorf("/y via b after its restart: %q, want the invalidation it missed applied", s)
	}

	// Down longer than the history: the records b missed are trimmed, so
	// it cannot tell what it missed and clears its cache.
	b.stop()
	for i := range 5 {
		invalidate(t, a, fmt.Sprintf("/z/%d", i))
	}
	b = start("b")
	eventually(t, "b, restarted past the history, caught up", func() (bool, string) {
		return b.inst.Cache().Applied() > 0, ""
	})
	if s := cacheGet(t, b, "/x/1"); isHit(s) {
		t.Errorf("/x/1 via b restarted past the history: %q, want a miss (its cache cleared)", s)
	}
	resp, err := dial(t, e).Get(ctxT(t), "/spillway/cdn/invalidations/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 4 {
		t.Errorf("%d invalidation records kept, want 4 (the history bound)", len(resp.Kvs))
	}
	if _, err := os.Stat(filepath.Join(dirs["b"], "invalidation-mark")); err != nil {
		t.Errorf("b's mark beside its disk tier: %v", err)
	}
}
