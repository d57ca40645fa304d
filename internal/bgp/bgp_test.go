package bgp

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/bgp/birdtest"
	"github.com/spillwaylb/spillway/internal/config"
)

var (
	lo4  = netip.MustParseAddr("127.0.0.1")
	lo6  = netip.MustParseAddr("::1")
	pfx4 = netip.MustParsePrefix("203.0.113.0/24")
	pfx6 = netip.MustParsePrefix("2001:db8:1::/48")
)

const wait = 10 * time.Second

func intp(n int) *int { return &n }

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// newSpeaker returns a Speaker closed at the end of the test.
func newSpeaker(t *testing.T) *Speaker {
	s := New(testLogger(t))
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func peerNeighbor(p birdtest.Peer) config.BGPNeighbor {
	return config.BGPNeighbor{Address: p.Local.String(), PeerASN: int64(p.LocalASN), Port: p.Port, HoldTimeSec: intp(9)}
}

// TestAnnounceWithdraw: IPv4 over an IPv4 session and IPv6 over an IPv6
// one, next hop self, plain, prepended and with a MED, then withdrawn.
func TestAnnounceWithdraw(t *testing.T) {
	p4 := birdtest.Peer{Name: "spill4", Local: lo4, Port: birdtest.FreePort(t, lo4), LocalASN: 65000, Neighbor: lo4, PeerASN: 65001, HoldTime: 9}
	p6 := birdtest.Peer{Name: "spill6", Local: lo6, Port: birdtest.FreePort(t, lo6), LocalASN: 65000, Neighbor: lo6, PeerASN: 65001, HoldTime: 9}
	bird := birdtest.Start(t, p4, p6)
	s := newSpeaker(t)
	ctx := context.Background()
	conf := &config.BGP{LocalASN: 65001, RouterID: "192.0.2.1", Neighbors: []config.BGPNeighbor{peerNeighbor(p4), peerNeighbor(p6)}}
	if err := s.Configure(ctx, conf, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []birdtest.Peer{p4, p6} {
		if err := bird.WaitProtocol(p.Name, "Established", wait); err != nil {
			t.Fatal(err)
		}
	}
	med := int64(100)
	steps := []struct {
		route  Route
		proto  string
		hop    string
		asPath []uint32
		med    int64
	}{
		{Route{Prefix: pfx4}, "spill4", "127.0.0.1", []uint32{65001}, -1},
		{Route{Prefix: pfx6}, "spill6", "::1", []uint32{65001}, -1},
		{Route{Prefix: pfx4, ASPathPrepend: 3}, "spill4", "127.0.0.1", []uint32{65001, 65001, 65001, 65001}, -1},
		{Route{Prefix: pfx6, MED: &med}, "spill6", "::1", []uint32{65001}, 100},
	}
	for _, st := range steps {
		if err := s.Announce(ctx, st.route); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(wait)
		for {
			r, ok, err := bird.RouteFrom(st.route.Prefix, st.proto)
			if err == nil && ok && slices.Equal(r.ASPath, st.asPath) && r.MED == st.med {
				if r.NextHop != st.hop {
					t.Errorf("%s: next hop %s, want %s (next hop self)", st.route.Prefix, r.NextHop, st.hop)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%+v: bird has %+v (present %v, %v), want AS path %v MED %d", st.route, r, ok, err, st.asPath, st.med)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// One family per session: the IPv4 prefix never reaches the IPv6
	// session and the other way round.
	if _, ok, _ := bird.RouteFrom(pfx4, "spill6"); ok {
		t.Error("IPv4 prefix announced on the IPv6 session")
	}
	sessions := s.Sessions(ctx)
	if len(sessions) != 2 || sessions[0].Neighbor != p4.Local.String()+":"+strconv.Itoa(p4.Port) || sessions[0].State != "ESTABLISHED" || sessions[1].State != "ESTABLISHED" || sessions[0].Advertised != 1 {
		t.Errorf("sessions %+v", sessions)
	}
	for _, p := range []netip.Prefix{pfx4, pfx6} {
		if err := s.Withdraw(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []struct {
		pfx   netip.Prefix
		proto string
	}{{pfx4, "spill4"}, {pfx6, "spill6"}} {
		if _, _, err := bird.WaitRoute(p.pfx, p.proto, false, wait); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Announced(); len(got) != 0 {
		t.Errorf("announced after withdrawing: %v", got)
	}
}

// TestReconfigure: a reload that changes one neighbor restarts that
// session only; one that removes a neighbor ends its session; one that
// changes the local ASN restarts every session and announces the routes
// again. Routes a router sends never reach another router.
func TestReconfigure(t *testing.T) {
	// Two routers (two bird daemons with their own router IDs: GoBGP
	// never sends a route back to the router ID it came from) on four
	// loopback addresses: each session has its own neighbor address, and
	// no next hop is the neighbor's own address.
	a, b := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.4")
	pa := birdtest.Peer{Name: "up_a", Local: a, Port: birdtest.FreePort(t, a), LocalASN: 65000, Neighbor: lo4, PeerASN: 65001,
		Export: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}}
	pb := birdtest.Peer{Name: "up_b", Local: b, Port: birdtest.FreePort(t, b), LocalASN: 65002, Neighbor: netip.MustParseAddr("127.0.0.3"), PeerASN: 65001}
	bird := birdtest.Start(t, pa)
	birdB := birdtest.StartRouter(t, "192.0.2.253", pb)
	s := newSpeaker(t)
	ctx := context.Background()
	na, nb := peerNeighbor(pa), peerNeighbor(pb)
	na.LocalAddress, nb.LocalAddress = "127.0.0.1", "127.0.0.3"
	conf := &config.BGP{LocalASN: 65001, RouterID: "192.0.2.1", Neighbors: []config.BGPNeighbor{na, nb}}
	if err := s.Configure(ctx, conf, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Announce(ctx, Route{Prefix: pfx4}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		b *birdtest.Bird
		p string
	}{{bird, "up_a"}, {birdB, "up_b"}} {
		if _, _, err := r.b.WaitRoute(pfx4, r.p, true, wait); err != nil {
			t.Fatal(err)
		}
	}
	sinceA := protocolSince(t, bird, "up_a")
	// up_a sends Spillway a route; through Spillway it would come back
	// from up_b.
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		if ss := s.Sessions(ctx); len(ss) == 2 && ss[0].Received == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Spillway did not receive bird's test route: %+v", s.Sessions(ctx))
		}
	}
	time.Sleep(500 * time.Millisecond)

	if _, ok, _ := birdB.RouteFrom(netip.MustParsePrefix("198.51.100.0/24"), "up_b"); ok {
		t.Error("a route learned from one router was sent to another")
	}

	// Change rb's hold time (a fresh config, as a reload makes one).
	conf2 := &config.BGP{LocalASN: 65001, RouterID: "192.0.2.1", Neighbors: []config.BGPNeighbor{na, nb}}
	conf2.Neighbors[1].HoldTimeSec = intp(12)
	if err := s.Configure(ctx, conf2, nil); err != nil {
		t.Fatal(err)
	}
	if err := birdB.WaitProtocol("up_b", "Established", wait); err != nil {
		t.Fatal(err)
	}
	if _, _, err := birdB.WaitRoute(pfx4, "up_b", true, wait); err != nil {
		t.Fatal(err)
	}
	if got := protocolSince(t, bird, "up_a"); !birdtest.SameSince(got, sinceA) {
		t.Errorf("up_a's session restarted (since %s, was %s) though its neighbor did not change", got, sinceA)
	}
	// Remove rb.
	conf3 := &config.BGP{LocalASN: 65001, RouterID: "192.0.2.1", Neighbors: []config.BGPNeighbor{na}}
	if err := s.Configure(ctx, conf3, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := birdB.WaitRoute(pfx4, "up_b", false, wait); err != nil {
		t.Fatal(err)
	}
	if got := protocolSince(t, bird, "up_a"); !birdtest.SameSince(got, sinceA) {
		t.Errorf("up_a's session restarted when up_b was removed")
	}
	if ss := s.Sessions(ctx); len(ss) != 1 || ss[0].Flaps != 0 || ss[0].State != "ESTABLISHED" {
		t.Errorf("Spillway's side of up_a after two reloads: %+v", ss)
	}
	// A new local ASN restarts the speaker; the route comes back with it.
	conf4 := &config.BGP{LocalASN: 65003, RouterID: "192.0.2.1", Neighbors: []config.BGPNeighbor{na}}
	conf4.Neighbors[0].PeerASN = 65000
	if err := s.Configure(ctx, conf4, nil); err != nil {
		t.Fatal(err)
	}
	// bird expects AS 65001: the session cannot come up with 65003.
	time.Sleep(time.Second)
	if st := bird.Protocol("up_a"); st == "Established" {
		t.Errorf("ra established with the wrong AS")
	}
	if err := s.Configure(ctx, conf, nil); err != nil {
		t.Fatal(err)
	}
	if _, r, err := bird.WaitRoute(pfx4, "up_a", true, wait); err != nil || !slices.Equal(r.ASPath, []uint32{65001}) {
		t.Fatalf("after the restart: %+v, %v", r, err)
	}
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

// TestPasswordAndListen: a TCP MD5 session (password from a file), and
// one bird dials because Spillway listens.
func TestPasswordAndListen(t *testing.T) {
	listen := birdtest.FreePort(t, lo4)
	pm := birdtest.Peer{Name: "up_md5", Local: lo4, Port: birdtest.FreePort(t, lo4), LocalASN: 65000, Neighbor: lo4, PeerASN: 65001, Password: "s3cret-bgp"}
	pl := birdtest.Peer{Name: "up_dial", Local: lo6, Port: birdtest.FreePort(t, lo6), LocalASN: 65000, Neighbor: lo6, NeighborPort: listen, PeerASN: 65001}
	bird := birdtest.Start(t, pm, pl)
	pwFile := filepath.Join(t.TempDir(), "up_md5")
	if err := os.WriteFile(pwFile, []byte("s3cret-bgp\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nm := peerNeighbor(pm)
	nm.PasswordFile = pwFile
	nl := peerNeighbor(pl)
	nl.Port = 1 // Spillway's dial to port 1 fails: only bird's dial to Spillway can bring it up.
	conf := &config.BGP{LocalASN: 65001, RouterID: "192.0.2.1", ListenPort: &listen, Neighbors: []config.BGPNeighbor{nm, nl}}
	pws, err := Passwords(conf)
	if err != nil || pws["127.0.0.1"] != "s3cret-bgp" {
		t.Fatalf("Passwords: %v, %v", pws, err)
	}
	s := newSpeaker(t)
	if err := s.Configure(context.Background(), conf, pws); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"up_md5", "up_dial"} {
		if err := bird.WaitProtocol(p, "Established", wait); err != nil {
			t.Fatal(err)
		}
	}
	// A wrong password keeps the session down.
	if err := os.WriteFile(pwFile, []byte("wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	pws, _ = Passwords(conf)
	if err := s.Configure(context.Background(), conf, pws); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if st := bird.Protocol("up_md5"); st == "Established" {
		t.Errorf("established with a wrong MD5 password")
	}
	os.Remove(pwFile)
	if _, err := Passwords(conf); err == nil || !strings.Contains(err.Error(), "neighbors[0].passwordFile") {
		t.Errorf("missing file: %v", err)
	}
}

// TestBadConfigureKeepsTheOld: a listen port in use is refused before
// anything stops; the session in force stays up, unrestarted.
func TestBadConfigureKeepsTheOld(t *testing.T) {
	p := birdtest.Peer{Name: "up_a", Local: lo4, Port: birdtest.FreePort(t, lo4), LocalASN: 65000, Neighbor: lo4, PeerASN: 65001}
	bird := birdtest.Start(t, p)
	s := newSpeaker(t)
	ctx := context.Background()
	conf := &config.BGP{LocalASN: 65001, RouterID: "192.0.2.1", Neighbors: []config.BGPNeighbor{peerNeighbor(p)}}
	if err := s.Configure(ctx, conf, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Announce(ctx, Route{Prefix: pfx4}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := bird.WaitRoute(pfx4, "up_a", true, wait); err != nil {
		t.Fatal(err)
	}
	since := protocolSince(t, bird, "up_a")
	busy, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	bad := &config.BGP{LocalASN: 65001, RouterID: "192.0.2.1", ListenPort: &port, Neighbors: conf.Neighbors}
	if err := s.Configure(ctx, bad, nil); err == nil || !strings.Contains(err.Error(), "listenPort") {
		t.Fatalf("Configure with a busy port: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	if got := protocolSince(t, bird, "up_a"); !birdtest.SameSince(got, since) || bird.Protocol("up_a") != "Established" {
		t.Errorf("the session restarted or dropped: since %s (was %s), %s", got, since, bird.Protocol("up_a"))
	}
	if _, ok, _ := bird.RouteFrom(pfx4, "up_a"); !ok {
		t.Error("the route is gone")
	}
}
