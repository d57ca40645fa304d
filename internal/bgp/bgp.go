// Package bgp speaks BGP for spillway serve: it runs GoBGP
// (github.com/osrg/gobgp/v3) as a library, keeps its sessions with the
// neighbors of spillway.bgp, and announces and withdraws the routes the
// anycast decisions ask for (package anycast decides; this package only
// does the I/O).
//
// Choices it makes for GoBGP:
//   - routes are originated here (ORIGIN IGP) with the next hop unset,
//     so GoBGP puts the session's own address (next hop self); an IPv4
//     neighbor carries IPv4 unicast and an IPv6 neighbor IPv6 unicast;
//   - nothing learned from a router is accepted (a global import policy
//     lets only local routes in), so one router's routes never reach
//     another through Spillway;
//   - a DEGRADED route repeats the local ASN in its AS path (GoBGP adds
//     it once more on eBGP export) or carries a MED;
//   - connection retries every 5 s, and 5 s idle after a session drops
//     (GoBGP's defaults are 120 s and 30 s).
//
// Configure applies a config: a change of localAsn, routerId or
// listenPort restarts the speaker (every session), a changed neighbor is
// deleted and added again (its session restarts), and unchanged
// neighbors keep their sessions.
package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/spillwaylb/spillway/internal/config"
)

// Timers GoBGP is given for every neighbor.
const (
	connectRetry = 5 // seconds between connection attempts
	idleHold     = 5 // seconds idle after a session drops
)

// localOnly is the global import policy's name.
const localOnly = "spillway-local-routes-only"

// Route is what is announced for one prefix.
type Route struct {
	Prefix netip.Prefix
	// ASPathPrepend repeats the local ASN this many more times.
	ASPathPrepend int
	// MED, when set, is sent as MULTI_EXIT_DISC.
	MED *int64
}

// global is the part of spillway.bgp whose change restarts the speaker.
type global struct {
	asn      uint32
	routerID string
	listen   int
}

// neighbor is one neighbor as GoBGP is given it (comparable: a
// neighbor whose fields all equal keeps its session on reload).
type neighbor struct {
	address, name, localAddress, password string
	peerASN                               uint32
	port, holdTime                        int
}

func newNeighbor(n config.BGPNeighbor, password string) neighbor {
	return neighbor{address: n.Address, name: n.String(), localAddress: n.LocalAddress, password: password,
		peerASN: uint32(n.PeerASN), port: n.RemotePort(), holdTime: n.HoldTime()}
}

// Speaker is one GoBGP server and what it was told. Its methods are safe
// for concurrent use.
type Speaker struct {
	log *slog.Logger
	srv *server.BgpServer

	mu sync.Mutex
	// applied is the configuration in force (nil: stopped); running the
	// global part GoBGP was started with.
	applied *desired
	running *global
	peers   map[string]neighbor     // by neighbor address
	routes  map[netip.Prefix]Route  // announced
	uuids   map[netip.Prefix][]byte // GoBGP's path IDs of routes
	// states and changes are each session's last state and when it
	// entered it (the peer-state watch).
	states  map[string]string
	changes map[string]time.Time
	stop    context.CancelFunc // ends the peer-state watch
}

// New starts a GoBGP server (no sessions until Configure).
func New(log *slog.Logger) *Speaker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := server.NewBgpServer(server.LoggerOption(&logger{log: log}))
	go srv.Serve()
	return &Speaker{log: log, srv: srv, peers: map[string]neighbor{}, routes: map[netip.Prefix]Route{}, uuids: map[netip.Prefix][]byte{},
		states: map[string]string{}, changes: map[string]time.Time{}}
}

// Passwords reads the neighbors' passwordFile (by neighbor address): at
// start and on every reload, so a reload that cannot read one is
// rejected before anything changes.
func Passwords(c *config.BGP) (map[string]string, error) {
	out := map[string]string{}
	if c == nil {
		return out, nil
	}
	for i, n := range c.Neighbors {
		if n.PasswordFile == "" {
			continue
		}
		b, err := os.ReadFile(n.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("spillway.bgp.neighbors[%d].passwordFile: %w (fix: create the file with the session's TCP MD5 password, readable by spillway)", i, err)
		}
		pw := strings.TrimSpace(string(b))
		if pw == "" || len(pw) > 80 {
			return nil, fmt.Errorf("spillway.bgp.neighbors[%d].passwordFile: %s holds %d characters (fix: a TCP MD5 password of 1 to 80 characters)", i, n.PasswordFile, len(pw))
		}
		out[n.Address] = pw
	}
	return out, nil
}

// Configure applies c (nil: stop speaking BGP) with the neighbors'
// passwords (Passwords). Routes already announced are kept and sent on
// every session that comes up. When c cannot be applied (a listen port
// in use), the previous configuration is put back and the error says
// why.
func (s *Speaker) Configure(ctx context.Context, c *config.BGP, passwords map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var want *desired
	if c != nil {
		want = &desired{global: global{asn: uint32(c.LocalASN), routerID: c.RouterID, listen: c.Listen()}, peers: map[string]neighbor{}}
		for _, n := range c.Neighbors {
			want.peers[n.Address] = newNeighbor(n, passwords[n.Address])
		}
	}
	prev := s.applied
	err := s.applyLocked(ctx, want)
	if err != nil && prev != nil {
		if rerr := s.applyLocked(ctx, prev); rerr != nil {
			s.log.Error("bgp: the previous configuration could not be put back", "err", rerr)
		}
	}
	return err
}

// desired is a configuration as the speaker applies it.
type desired struct {
	global global
	peers  map[string]neighbor
}

// applyLocked makes the speaker run d (nil: stopped).
func (s *Speaker) applyLocked(ctx context.Context, d *desired) error {
	if d == nil {
		s.applied = nil
		return s.stopLocked(ctx)
	}
	if s.running == nil || *s.running != d.global {
		if err := s.startLocked(ctx, &d.global); err != nil {
			return err
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(s.peers)) {
		if w, ok := d.peers[addr]; !ok || w != s.peers[addr] {
			if err := s.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr}); err != nil {
				return fmt.Errorf("bgp: remove neighbor %s: %w", addr, err)
			}
			s.log.Info("bgp: neighbor removed", "neighbor", s.name(addr))
			delete(s.peers, addr)
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(d.peers)) {
		if _, ok := s.peers[addr]; ok {
			continue
		}
		n := d.peers[addr]
		if err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: peerAPI(n)}); err != nil {
			return fmt.Errorf("bgp: add neighbor %s: %w", n.name, err)
		}
		s.peers[addr] = n
		s.log.Info("bgp: neighbor added", "neighbor", n.name, "peer_asn", n.peerASN)
	}
	s.applied = d
	return nil
}

// startLocked (re)starts the speaker with g and puts the announced
// routes back.
func (s *Speaker) startLocked(ctx context.Context, g *global) error {
	if g.listen > 0 {
		// A port in use is the likely failure: find it before the
		// running sessions are stopped.
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(g.listen))
		if err != nil {
			return fmt.Errorf("bgp: spillway.bgp.listenPort %d: %w (fix: a free port, or -1 to only dial out)", g.listen, err)
		}
		ln.Close()
	}
	if err := s.stopLocked(ctx); err != nil {
		return err
	}
	err := s.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: g.asn, RouterId: g.routerID, ListenPort: int32(g.listen)}})
	if err != nil {
		return fmt.Errorf("bgp: start (localAsn %d, routerId %s, listenPort %d): %w", g.asn, g.routerID, g.listen, err)
	}
	if err := s.importLocalOnly(ctx); err != nil {
		s.srv.StopBgp(ctx, &api.StopBgpRequest{})
		return err
	}
	s.running = g
	wctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	if err := s.srv.WatchEvent(wctx, &api.WatchEventRequest{Peer: &api.WatchEventRequest_Peer{}}, s.peerEvent); err != nil {
		cancel()
		return fmt.Errorf("bgp: watch sessions: %w", err)
	}
	s.log.Info("bgp: speaker started", "local_asn", g.asn, "router_id", g.routerID, "listen_port", g.listen)
	announced := s.routes
	s.routes, s.uuids = map[netip.Prefix]Route{}, map[netip.Prefix][]byte{}
	for _, p := range slices.SortedFunc(maps.Keys(announced), comparePrefix) {
		if err := s.announceLocked(ctx, announced[p]); err != nil {
			return err
		}
	}
	return nil
}

// importLocalOnly installs the global import policy that lets in only
// the routes originated here.
func (s *Speaker) importLocalOnly(ctx context.Context) error {
	p := &api.Policy{Name: localOnly, Statements: []*api.Statement{{
		Name:       localOnly + "-accept",
		Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ACCEPT},
	}}}
	if err := s.srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: p}); err != nil && !strings.Contains(err.Error(), "already") {
		return fmt.Errorf("bgp: import policy: %w", err)
	}
	err := s.srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name: "global", Direction: api.PolicyDirection_IMPORT, Policies: []*api.Policy{{Name: localOnly}}, DefaultAction: api.RouteAction_REJECT,
	}})
	if err != nil {
		return fmt.Errorf("bgp: import policy: %w", err)
	}
	return nil
}

// stopLocked ends every session (a Cease notification to each).
func (s *Speaker) stopLocked(ctx context.Context) error {
	if s.running == nil {
		return nil
	}
	s.stop()
	if err := s.srv.StopBgp(ctx, &api.StopBgpRequest{}); err != nil {
		return fmt.Errorf("bgp: stop: %w", err)
	}
	s.running, s.peers = nil, map[string]neighbor{}
	s.log.Info("bgp: speaker stopped")
	return nil
}

// Close ends every session; the routes are withdrawn by the routers as
// the sessions close. The Speaker may be configured again.
func (s *Speaker) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applyLocked(ctx, nil)
}

// Announce announces r, replacing what was announced for its prefix.
func (s *Speaker) Announce(ctx context.Context, r Route) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		s.routes[r.Prefix] = r // sent once the speaker starts
		return nil
	}
	return s.announceLocked(ctx, r)
}

func (s *Speaker) announceLocked(ctx context.Context, r Route) error {
	path, err := pathAPI(r, s.running.asn)
	if err != nil {
		return err
	}
	resp, err := s.srv.AddPath(ctx, &api.AddPathRequest{TableType: api.TableType_GLOBAL, Path: path})
	if err != nil {
		return fmt.Errorf("bgp: announce %s: %w", r.Prefix, err)
	}
	s.routes[r.Prefix], s.uuids[r.Prefix] = r, resp.Uuid
	return nil
}

// Withdraw withdraws prefix p (nothing when it is not announced).
func (s *Speaker) Withdraw(ctx context.Context, p netip.Prefix) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.routes[p]; !ok {
		return nil
	}
	if id := s.uuids[p]; s.running != nil && id != nil {
		if err := s.srv.DeletePath(ctx, &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Uuid: id}); err != nil {
			return fmt.Errorf("bgp: withdraw %s: %w", p, err)
		}
	}
	delete(s.routes, p)
	delete(s.uuids, p)
	return nil
}

// Announced returns the routes announced now, by prefix.
func (s *Speaker) Announced() map[netip.Prefix]Route {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.routes)
}

// pathAPI builds GoBGP's path for r.
func pathAPI(r Route, asn uint32) (*api.Path, error) {
	fam := &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	if r.Prefix.Addr().Is6() {
		fam.Afi = api.Family_AFI_IP6
	}
	nlri, err := anypb.New(&api.IPAddressPrefix{Prefix: r.Prefix.Addr().String(), PrefixLen: uint32(r.Prefix.Bits())})
	if err != nil {
		return nil, err
	}
	attrs := []*anypb.Any{}
	origin, err := anypb.New(&api.OriginAttribute{Origin: 0}) // IGP
	if err != nil {
		return nil, err
	}
	attrs = append(attrs, origin)
	var hop *anypb.Any
	if r.Prefix.Addr().Is4() {
		hop, err = anypb.New(&api.NextHopAttribute{NextHop: "0.0.0.0"})
	} else {
		hop, err = anypb.New(&api.MpReachNLRIAttribute{Family: fam, NextHops: []string{"::"}, Nlris: []*anypb.Any{nlri}})
	}
	if err != nil {
		return nil, err
	}
	attrs = append(attrs, hop)
	if r.ASPathPrepend > 0 {
		seg := &api.AsSegment{Type: api.AsSegment_AS_SEQUENCE, Numbers: slices.Repeat([]uint32{asn}, r.ASPathPrepend)}
		a, err := anypb.New(&api.AsPathAttribute{Segments: []*api.AsSegment{seg}})
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, a)
	}
	if r.MED != nil {
		a, err := anypb.New(&api.MultiExitDiscAttribute{Med: uint32(*r.MED)})
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, a)
	}
	return &api.Path{Family: fam, Nlri: nlri, Pattrs: attrs}, nil
}

// peerAPI builds GoBGP's peer for n: the families of its address, next
// hop self (GoBGP's default for routes originated here), the timers.
func peerAPI(n neighbor) *api.Peer {
	a, _ := netip.ParseAddr(n.address)
	fam := &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	if a.Is6() {
		fam.Afi = api.Family_AFI_IP6
	}
	hold := uint64(n.holdTime)
	return &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: n.address, PeerAsn: n.peerASN, AuthPassword: n.password},
		Timers:    &api.Timers{Config: &api.TimersConfig{HoldTime: hold, KeepaliveInterval: hold / 3, ConnectRetry: connectRetry, IdleHoldTimeAfterReset: idleHold}},
		Transport: &api.Transport{RemotePort: uint32(n.port), LocalAddress: n.localAddress},
		AfiSafis:  []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: fam, Enabled: true}}},
	}
}

// name is a neighbor's address:port, or its address when unknown.
func (s *Speaker) name(addr string) string {
	if n, ok := s.peers[addr]; ok {
		return n.name
	}
	return addr
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
