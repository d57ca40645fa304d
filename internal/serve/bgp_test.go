package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/anycast"
	"github.com/spillwaylb/spillway/internal/bgp/birdtest"
	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/report"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// The anycast prefixes of the tests (documentation ranges: bird refuses
// loopback prefixes as bogus, so the frontend on 127.0.0.1 announces a
// prefix it is not bound to, a warning); the IPv6 one goes over the
// IPv6 session.
var (
	anyV4 = netip.MustParsePrefix("203.0.113.0/24")
	anyV6 = netip.MustParsePrefix("2001:db8:1::/48")
	lo4   = netip.MustParseAddr("127.0.0.1")
	lo6   = netip.MustParseAddr("::1")
)

// bgpWait bounds every wait for bird to see a change.
const bgpWait = 10 * time.Second

// stoppable is a real HTTP backend on a fixed loopback address that can
// be stopped (its port refuses connections, so its health check fails)
// and started again on the same address.
type stoppable struct {
	t    *testing.T
	addr string
	mu   sync.Mutex
	srv  *http.Server
}

func newStoppable(t *testing.T) *stoppable {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	b := &stoppable{t: t, addr: addr}
	t.Cleanup(b.stop)
	return b
}

func (b *stoppable) start() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv != nil {
		return
	}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port may linger a moment after a stop
		if ln, err = net.Listen("tcp", b.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		b.t.Fatalf("backend %s: %v", b.addr, err)
	}
	b.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go b.srv.Serve(ln)
}

func (b *stoppable) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv != nil {
		b.srv.Close()
		b.srv = nil
	}
}

// anycastConfig is one service over the backends (fast HTTP health
// checks), one frontend on 127.0.0.1 announcing anyV4 and anyV6 to bird's
// two sessions, degraded below 50% with 3 prepends.
func anycastConfig(t *testing.T, backends []*stoppable, peers []birdtest.Peer, bgpExtra string) *config.Config {
	var b strings.Builder
	b.WriteString(`healthChecks:
- {name: hc, type: HTTP, checkIntervalMs: 100, timeoutMs: 100, healthyThreshold: 2, unhealthyThreshold: 2, httpHealthCheck: {requestPath: /healthz}}
networkEndpointGroups:
- name: neg
  zone: us-east1-b
  endpoints:
`)
	for _, be := range backends {
		host, port, _ := net.SplitHostPort(be.addr)
		fmt.Fprintf(&b, "  - {ipAddress: %s, port: %s}\n", host, port)
	}
	b.WriteString("backendServices:\n- {name: bs, healthChecks: [hc], backends: [{group: neg}]}\nurlMaps:\n- {name: um, defaultService: bs}\n")
	fmt.Fprintf(&b, "frontends:\n- {name: edge, address: \"127.0.0.1:0\", urlMap: um, anycastPrefixes: [%s, \"%s\"]}\n", anyV4, anyV6)
	b.WriteString("spillway:\n  bgp:\n    localAsn: 65001\n    routerId: 192.0.2.1\n    degraded: {belowHealthyCapacityPercent: 50, asPathPrepend: 3}\n    neighbors:\n")
	for _, p := range peers {
		fmt.Fprintf(&b, "    - {address: \"%s\", peerAsn: %d, port: %d, holdTimeSec: 9}\n", p.Local, p.LocalASN, p.Port)
	}
	b.WriteString(bgpExtra)
	return servetest.Parse(t, b.String())
}

// birdPeers starts bird with an IPv4 and an IPv6 session for Spillway.
func birdPeers(t *testing.T) (*birdtest.Bird, []birdtest.Peer) {
	peers := []birdtest.Peer{
		{Name: "edge4", Local: lo4, Port: birdtest.FreePort(t, lo4), LocalASN: 65000, Neighbor: lo4, PeerASN: 65001, HoldTime: 9},
		{Name: "edge6", Local: lo6, Port: birdtest.FreePort(t, lo6), LocalASN: 65000, Neighbor: lo6, PeerASN: 65001, HoldTime: 9},
	}
	return birdtest.Start(t, peers...), peers
}

// waitRoute waits until bird has (or has no) route for p, with asPath
// when given, and returns when it saw it.
func waitRoute(t *testing.T, b *birdtest.Bird, p netip.Prefix, present bool, asPath []uint32) time.Time {
	t.Helper()
	proto := "edge4"
	if p.Addr().Is6() {
		proto = "edge6"
	}
	deadline := time.Now().Add(bgpWait)
	for {
		r, ok, err := b.RouteFrom(p, proto)
		now := time.Now()
		if err == nil && ok == present && (!present || asPath == nil || slices.Equal(r.ASPath, asPath)) {
			return now
		}
		if now.After(deadline) {
			t.Fatalf("bird: route %s present=%v (AS path %v), want present=%v AS path %v (err %v)", p, ok, r.ASPath, present, asPath, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func healthBGP(t *testing.T, s *serve.Server) *report.BGP {
	t.Helper()
	var h report.Health
	resp, err := http.Get("http://" + s.AdminAddr() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	if h.BGP == nil {
		t.Fatal("get-health has no bgp")
	}
	return h.BGP
}

func prefixState(t *testing.T, b *report.BGP, p netip.Prefix) anycast.Prefix {
	t.Helper()
	for _, d := range b.Prefixes {
		if d.Prefix == p {
			return d
		}
	}
	t.Fatalf("get-health has no prefix %s: %+v", p, b.Prefixes)
	return anycast.Prefix{}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// TestAnycastFollowsHealth runs spillway serve against bird: the
// prefixes appear at bird once the backends pass their health checks,
// carry the prepend while the site is degraded, disappear when every
// backend is stopped, and, after a reload that sets a hold-down (the
// sessions stay up), come back only once it has passed.
func TestAnycastFollowsHealth(t *testing.T) {
	bird, peers := birdPeers(t)
	backends := []*stoppable{newStoppable(t), newStoppable(t), newStoppable(t), newStoppable(t)}
	cfg := anycastConfig(t, backends, peers, "    holdDownSec: 0\n")
	s := servetest.Run(t, cfg, serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	for _, p := range peers {
		if err := bird.WaitProtocol(p.Name, "Established", bgpWait); err != nil {
			t.Fatal(err)
		}
	}
	// No backend listens: nothing is announced.
	time.Sleep(500 * time.Millisecond)
	waitRoute(t, bird, anyV4, false, nil)
	if d := prefixState(t, healthBGP(t, s), anyV4); d.State != anycast.Withdrawn || d.Reason != anycast.NoHealthyBackend {
		t.Fatalf("before any backend: %+v", d)
	}
	startAll := func() {
		for _, b := range backends {
			b.start()
		}
	}
	var up, down, degrade []time.Duration
	for cycle := 0; cycle < 3; cycle++ {
		t0 := time.Now()
		startAll()
		for _, p := range []netip.Prefix{anyV4, anyV6} {
			up = append(up, waitRoute(t, bird, p, true, []uint32{65001}).Sub(t0))
		}
		t0 = time.Now()
		for _, b := range backends[1:] {
			b.stop()
		}
		degrade = append(degrade, waitRoute(t, bird, anyV4, true, []uint32{65001, 65001, 65001, 65001}).Sub(t0))
		if d := prefixState(t, healthBGP(t, s), anyV4); d.State != anycast.Degraded || d.Reason != anycast.LowCapacity || d.ASPathPrepend != 3 {
			t.Fatalf("3 of 4 backends stopped: %+v", d)
		}
		t0 = time.Now()
		backends[0].stop()
		for _, p := range []netip.Prefix{anyV4, anyV6} {
			down = append(down, waitRoute(t, bird, p, false, nil).Sub(t0))
		}
	}
	t.Logf("health change to bird (3 cycles, both prefixes; probes every 100 ms, thresholds 2): announced median %s %v; degraded median %s %v; withdrawn median %s %v",
		median(up), up, median(degrade), degrade, median(down), down)
	checkMetrics(t, s, "spillway_bgp_prefix_state{prefix=\"203.0.113.0/24\",reason=\"no_healthy_backend\",state=\"WITHDRAWN\"} 1")

	// A reload that only sets a hold-down keeps the sessions; the prefix
	// then returns only after 2 s healthy.
	since := protocolSince(t, bird, "edge4")
	if err := s.Reload(context.Background(), anycastConfig(t, backends, peers, "    holdDownSec: 2\n")); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	startAll()
	back := waitRoute(t, bird, anyV4, true, []uint32{65001}).Sub(t0)
	if back < 2*time.Second {
		t.Errorf("the prefix returned %s after the backends, within the 2 s hold-down", back)
	}
	t.Logf("with holdDownSec 2 the prefix returned %s after the backends started", back)
	if got := protocolSince(t, bird, "edge4"); !birdtest.SameSince(got, since) {
		t.Errorf("the reload restarted the IPv4 session (since %s, was %s)", got, since)
	}
	checkMetrics(t, s,
		"spillway_bgp_prefix_state{prefix=\"203.0.113.0/24\",reason=\"serving\",state=\"ANNOUNCED\"} 1",
		fmt.Sprintf("spillway_bgp_session_established{neighbor=\"127.0.0.1:%d\",peer_asn=\"65000\"} 1", peers[0].Port),
		fmt.Sprintf("spillway_bgp_session_state{neighbor=\"[::1]:%d\",peer_asn=\"65000\",state=\"ESTABLISHED\"} 1", peers[1].Port))
	b := healthBGP(t, s)
	if len(b.Sessions) != 2 || b.Sessions[0].State != "ESTABLISHED" || b.Sessions[1].State != "ESTABLISHED" || b.LocalASN != 65001 {
		t.Errorf("get-health sessions: %+v", b)
	}
	// The dashboard's state carries the same view.
	var dash struct{ BGP *report.BGP }
	resp, err := http.Get("http://" + s.AdminAddr() + "/ui/state")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&dash)
	resp.Body.Close()
	if err != nil || dash.BGP == nil || len(dash.BGP.Sessions) != 2 || prefixState(t, dash.BGP, anyV4).State != anycast.Announced {
		t.Errorf("/ui/state bgp: %+v, %v", dash.BGP, err)
	}

	// A reload whose password file is missing is rejected; the old
	// config keeps announcing.
	bad := anycastConfig(t, backends, peers, "")
	bad.Spillway.BGP.Neighbors[0].PasswordFile = filepath.Join(t.TempDir(), "missing")
	if err := s.Reload(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "passwordFile") {
		t.Errorf("reload with a missing password file: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	waitRoute(t, bird, anyV4, true, nil)
}

// protocolSince is when bird's protocol entered its state (compare
// with birdtest.SameSince).
func protocolSince(t *testing.T, b *birdtest.Bird, name string) time.Duration {
	t.Helper()
	since, err := b.Since(name)
	if err != nil {
		t.Fatal(err)
	}
	return since
}

// checkMetrics fetches /metrics and checks it has every line of want.
func checkMetrics(t *testing.T, s *serve.Server, want ...string) {
	t.Helper()
	resp, err := http.Get("http://" + s.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, w := range want {
		if !strings.Contains(string(body), w+"\n") {
			var got []string
			for _, l := range strings.Split(string(body), "\n") {
				if strings.HasPrefix(l, "spillway_bgp_") {
					got = append(got, l)
				}
			}
			t.Errorf("/metrics lacks %q; its BGP lines:\n%s", w, strings.Join(got, "\n"))
		}
	}
}

// TestAnycastLameDuck: under load, spillway serve's shutdown withdraws
// the prefixes first, serves on for drainSec, and only then closes its
// listener; no request fails meanwhile.
func TestAnycastLameDuck(t *testing.T) {
	bird, peers := birdPeers(t)
	backends := []*stoppable{newStoppable(t), newStoppable(t)}
	for _, b := range backends {
		b.start()
	}
	cfg := anycastConfig(t, backends, peers, "    drainSec: 2\n")
	s, err := serve.New(cfg, serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	stop := servetest.Start(t, s)
	waitRoute(t, bird, anyV4, true, nil)
	url := "http://" + s.FrontendAddr("edge") + "/"

	// Load: 4 keep-alive clients, each request bounded, for at most 20 s,
	// until drainSec/2 after the route left bird (clients would move to
	// another site then; requests sent until then must all succeed).
	var sent, failed atomic.Int64
	var firstErr atomic.Pointer[string]
	var withdrawnAt atomic.Pointer[time.Time]
	loadDone := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &http.Client{Timeout: 5 * time.Second}
			for end := time.Now().Add(20 * time.Second); time.Now().Before(end); {
				if at := withdrawnAt.Load(); at != nil && time.Since(*at) > time.Second {
					return
				}
				sent.Add(1)
				resp, err := cl.Get(url)
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					failed.Add(1)
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
				}
			}
		}()
	}
	go func() { wg.Wait(); close(loadDone) }()
	time.Sleep(500 * time.Millisecond)

	// Watch bird and the listener from the moment shutdown begins.
	shutdownAt := time.Now()
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	gone := waitRoute(t, bird, anyV4, false, nil)
	withdrawnAt.Store(&gone)
	closedAt := time.Time{}
	for deadline := time.Now().Add(bgpWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", s.FrontendAddr("edge"), time.Second)
		if err != nil {
			closedAt = time.Now()
			break
		}
		c.Close()
	}
	<-loadDone
	<-stopped
	if closedAt.IsZero() {
		t.Fatal("the frontend never stopped accepting connections")
	}
	t.Logf("shutdown: route gone at bird after %s, listener closed after %s; %d requests, %d failed",
		gone.Sub(shutdownAt), closedAt.Sub(shutdownAt), sent.Load(), failed.Load())
	if !gone.Before(closedAt) {
		t.Errorf("the listener closed (%s) before bird lost the route (%s)", closedAt.Sub(shutdownAt), gone.Sub(shutdownAt))
	}
	if d := closedAt.Sub(gone); d < time.Second {
		t.Errorf("the listener closed %s after the withdrawal, want about drainSec (2 s)", d)
	}
	if n := failed.Load(); n > 0 || sent.Load() < 10 {
		msg := ""
		if e := firstErr.Load(); e != nil {
			msg = *e
		}
		t.Errorf("%d of %d requests failed during the planned drain (first: %s)", n, sent.Load(), msg)
	}
}

// TestServeWithoutBGP: without spillway.bgp nothing about BGP shows.
func TestServeWithoutBGP(t *testing.T) {
	b := newStoppable(t)
	b.start()
	c := servetest.Parse(t, plainConfig(b))
	s := servetest.Run(t, c, serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	if h := s.Health(); h == nil || h.BGP != nil {
		t.Errorf("health without spillway.bgp: %+v", h)
	}
	resp, err := http.Get("http://" + s.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), "spillway_bgp_") {
		t.Error("/metrics has BGP series without spillway.bgp")
	}
}

// plainConfig is one frontend over backend b, without spillway.bgp.
func plainConfig(b *stoppable) string {
	host, port, _ := net.SplitHostPort(b.addr)
	return fmt.Sprintf(`networkEndpointGroups:
- {name: neg, zone: us-east1-b, endpoints: [{ipAddress: %s, port: %s}]}
backendServices:
- {name: bs, backends: [{group: neg}]}
urlMaps:
- {name: um, defaultService: bs}
frontends:
- {name: edge, address: "127.0.0.1:0", urlMap: um}
`, host, port)
}
