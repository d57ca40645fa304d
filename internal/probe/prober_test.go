package probe_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/probe"
)

// interval is the probe interval of the scheduling tests: short so tests
// are quick; assertions only use counts and generous upper bounds.
const interval = 20 * time.Millisecond

func fastSpec(typ string) probe.Spec {
	return probe.Spec{Type: typ, Interval: interval, Timeout: interval}
}

// hitServer is an HTTP server that counts requests per path, and its
// open connections.
type hitServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
	open atomic.Int64
}

func newHitServer(t *testing.T) *hitServer {
	t.Helper()
	s := &hitServer{hits: map[string]int{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.open.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.open.Add(-1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *hitServer) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func (s *hitServer) target(path string) probe.Target {
	spec := fastSpec(probe.TypeHTTP)
	spec.Path = path
	return probe.Target{Addr: s.Listener.Addr().String(), Spec: spec}
}

func newProber(rec *recorder) *probe.Prober {
	return probe.New(rec.record, probe.WithRand(rand.NewPCG(1, 2)))
}

func TestRunReportsAndListenerClosed(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	target := probe.Target{Addr: srv.Listener.Addr().String(), Spec: fastSpec(probe.TypeHTTP)}
	var rec recorder
	p := newProber(&rec)
	p.Update([]probe.Target{target})
	startRun(t, p)

	ok := func(r probe.Result) bool { return r.OK }
	waitFor(t, "3 successful probes", func() bool { return rec.count(target, ok) >= 3 })

	srv.Close() // stops the listener and closes connections
	closedAt := len(rec.snapshot())
	// Every probe that starts after Close must fail; allow one in flight.
	waitFor(t, "3 failed probes after the listener closed", func() bool {
		return rec.count(target, func(r probe.Result) bool { return !r.OK }) >= 3
	})
	results := rec.snapshot()
	for i, r := range results[closedAt+1:] {
		if r.OK {
			t.Errorf("result %d after listener closed = OK (%s), want failure", closedAt+1+i, r.Detail)
		}
	}
	last := results[len(results)-1]
	if !strings.Contains(last.Detail, "connection refused") {
		t.Errorf("last Detail = %q, want a connection-refused error", last.Detail)
	}
}

func TestUpdateDeduplicates(t *testing.T) {
	t.Parallel()
	srv := newHitServer(t)
	same := srv.target("/same")
	otherPath := srv.target("/other")
	var rec recorder
	p := newProber(&rec)
	// same appears three times: twice here, once more after the restart
	// below; otherPath differs only in Spec.Path and is its own stream.
	p.Update([]probe.Target{same, otherPath, same})
	startRun(t, p)
	waitFor(t, "first probes", func() bool { return srv.count("/same") >= 1 && srv.count("/other") >= 1 })
	p.Update([]probe.Target{same, same, otherPath})

	// One stream probes at most once per interval (start to start, missed
	// slots skipped), so over a window of n intervals it makes at most n+1
	// probes however slow the machine is. Two streams would make about 2n.
	const n = 25
	before := srv.count("/same")
	time.Sleep(n * interval)
	got := srv.count("/same") - before
	if got > n+2 {
		t.Errorf("hits on /same over %d intervals = %d, want <= %d (one probe stream)", n, got, n+2)
	}
	if got == 0 {
		t.Errorf("hits on /same over %d intervals = 0, want probing to continue", n)
	}
	for _, r := range rec.snapshot() {
		if r.Target != same && r.Target != otherPath {
			t.Errorf("result for unexpected target %+v", r.Target)
		}
	}
}

func TestUpdateRemovesTarget(t *testing.T) {
	t.Parallel()
	srvA, srv := newHitServer(t), newHitServer(t)
	a, b := srvA.target("/a"), srv.target("/b")
	var rec recorder
	var removed atomic.Bool
	var lateReports atomic.Int32
	p := probe.New(func(r probe.Result) {
		if removed.Load() && r.Target == a {
			lateReports.Add(1)
		}
		rec.record(r)
	}, probe.WithRand(rand.NewPCG(3, 4)))
	p.Update([]probe.Target{a, b})
	startRun(t, p)
	waitFor(t, "probes of /a and /b", func() bool { return srvA.count("/a") >= 2 && srv.count("/b") >= 2 })

	p.Update([]probe.Target{b}) // returns once /a's worker has ended
	removed.Store(true)
	// A request written just before Update may still be on its way to the
	// handler. Connections are accepted in order, so once a request of
	// our own on a later connection is answered, every probe's connection
	// has been accepted; once they are all closed (probes use a fresh
	// connection each), their requests have been handled.
	tr := &http.Transport{DisableKeepAlives: true}
	if resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get(srvA.URL + "/after-update"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	waitFor(t, "every connection to /a's server closed", func() bool { return srvA.open.Load() == 0 })
	aHits, bHits := srvA.count("/a"), srv.count("/b")
	waitFor(t, "/b to keep being probed", func() bool { return srv.count("/b") >= bHits+5 })
	if got := srvA.count("/a"); got != aHits {
		t.Errorf("hits on removed /a went from %d to %d, want no more probes", aHits, got)
	}
	if n := lateReports.Load(); n != 0 {
		t.Errorf("%d results reported for /a after Update removed it, want 0", n)
	}
}

func TestRunStopsCleanly(t *testing.T) {
	// Servers first, so the baseline includes their goroutines.
	plain := newHitServer(t)
	h2 := quiet(httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	h2.EnableHTTP2 = true
	h2.StartTLS()
	t.Cleanup(h2.Close)
	tcp := tcpServer(t, func(net.Conn) {})
	targets := []probe.Target{
		plain.target("/"),
		{Addr: h2.Listener.Addr().String(), Spec: fastSpec(probe.TypeHTTPS)},
		{Addr: h2.Listener.Addr().String(), Spec: fastSpec(probe.TypeHTTP2)},
		{Addr: tcp, Spec: fastSpec(probe.TypeTCP)},
		{Addr: refusedAddr(t), Spec: fastSpec(probe.TypeTCP)},
	}
	settle := func() int {
		runtime.GC()
		return runtime.NumGoroutine()
	}
	base := settle()

	var rec recorder
	p := newProber(&rec)
	p.Update(targets)
	stop := startRun(t, p)
	waitFor(t, "each target probed twice", func() bool {
		for _, tg := range targets {
			if rec.count(tg, nil) < 2 {
				return false
			}
		}
		return true
	})
	stop()
	after := len(rec.snapshot())

	// Server-side connection goroutines wind down asynchronously; poll.
	deadline := time.Now().Add(30 * time.Second)
	for settle() > base {
		if time.Now().After(deadline) {
			var buf bytes.Buffer
			pprof.Lookup("goroutine").WriteTo(&buf, 1)
			t.Fatalf("goroutines after Run returned = %d, want <= %d (before Run)\n%s", runtime.NumGoroutine(), base, buf.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(3 * interval)
	if got := len(rec.snapshot()); got != after {
		t.Errorf("%d results reported after Run returned, want 0", got-after)
	}
}

func TestRunTwice(t *testing.T) {
	target := probe.Target{Addr: tcpServer(t, func(net.Conn) {}), Spec: fastSpec(probe.TypeTCP)}
	var rec recorder
	p := newProber(&rec)
	p.Update([]probe.Target{target})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitFor(t, "the first Run to probe", func() bool { return rec.count(target, nil) >= 1 })

	if err := p.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("concurrent Run() = %v, want an already-running error", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v, want nil after cancel", err)
	}

	// Run can be started again after it returned, and resumes probing.
	before := rec.count(target, nil)
	startRun(t, p)
	waitFor(t, "the restarted Run to probe", func() bool { return rec.count(target, nil) > before })
}

func TestUpdateIgnoresInvalidTargets(t *testing.T) {
	srv := newHitServer(t)
	good := srv.target("/good")
	bad := probe.Target{Addr: "not-an-ip:80", Spec: fastSpec(probe.TypeHTTP)}
	var rec recorder
	p := newProber(&rec)
	p.Update([]probe.Target{bad, good})
	startRun(t, p)
	waitFor(t, "the valid target to be probed", func() bool { return rec.count(good, nil) >= 2 })
	if n := rec.count(bad, nil); n != 0 {
		t.Errorf("%d results for invalid target, want 0", n)
	}
}
