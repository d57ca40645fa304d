package bgp

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"time"

	api "github.com/osrg/gobgp/v3/api"
)

// Session is one neighbor's session as get-health and /metrics show it.
type Session struct {
	// Neighbor is the router's address:port.
	Neighbor string `json:"neighbor"`
	PeerASN  uint32 `json:"peerAsn"`
	// State is the BGP finite state machine's: IDLE, CONNECT, ACTIVE,
	// OPENSENT, OPENCONFIRM or ESTABLISHED.
	State string `json:"state"`
	// Since is when the session entered State (zero: not since start).
	Since time.Time `json:"since,omitzero"`
	// Flaps counts the times the session went down.
	Flaps uint32 `json:"flaps"`
	// Advertised counts the prefixes sent on the session now; Received
	// those the router sent (none is accepted: only routes originated
	// here are, so a router's routes never reach another).
	Advertised uint64 `json:"advertised"`
	Received   uint64 `json:"received"`
}

// States lists the session states, in the order of the state machine.
func States() []string {
	return []string{"IDLE", "CONNECT", "ACTIVE", "OPENSENT", "OPENCONFIRM", "ESTABLISHED"}
}

// Sessions returns every neighbor's session, by neighbor address (none
// while the speaker is stopped).
func (s *Speaker) Sessions(ctx context.Context) []Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		return nil
	}
	var out []Session
	s.srv.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		st := p.GetState()
		addr := st.GetNeighborAddress()
		ss := Session{Neighbor: s.name(addr), PeerASN: st.GetPeerAsn(), State: stateName(st.GetSessionState()), Flaps: st.GetFlops(), Since: s.changes[addr]}
		for _, a := range p.GetAfiSafis() {
			ss.Advertised += a.GetState().GetAdvertised()
			ss.Received += a.GetState().GetReceived()
		}
		out = append(out, ss)
	})
	slices.SortFunc(out, func(a, b Session) int {
		return netip.MustParseAddrPort(a.Neighbor).Compare(netip.MustParseAddrPort(b.Neighbor))
	})
	return out
}

// stateName is GoBGP's session state without its prefix.
func stateName(st api.PeerState_SessionState) string {
	if st == api.PeerState_UNKNOWN {
		return "IDLE"
	}
	return strings.TrimPrefix(st.String(), "PeerState_")
}

// peerEvent logs each session's state changes and records when.
func (s *Speaker) peerEvent(r *api.WatchEventResponse) {
	p := r.GetPeer().GetPeer()
	if p == nil || r.GetPeer().GetType() != api.WatchEventResponse_PeerEvent_STATE {
		return
	}
	st := p.GetState()
	addr := st.GetNeighborAddress()
	state := stateName(st.GetSessionState())
	s.mu.Lock()
	was := s.states[addr]
	s.states[addr], s.changes[addr] = state, time.Now()
	name := s.name(addr)
	s.mu.Unlock()
	switch {
	case state == "ESTABLISHED":
		s.log.Info("bgp: session established", "neighbor", name, "peer_asn", st.GetPeerAsn(), "router_id", st.GetRouterId())
	case was == "ESTABLISHED":
		s.log.Warn("bgp: session down", "neighbor", name, "state", state)
	default:
		s.log.Debug("bgp: session state", "neighbor", name, "state", state)
	}
}
