package bgp

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"time"

	api "github.com/osrg/gobgp/v3/api"

	"github.com/spillwaylb/spillway/internal/serve/report"
)

// States lists the session states, in the order of the state machine.
func States() []string {
	return []string{"IDLE", "CONNECT", "ACTIVE", "OPENSENT", "OPENCONFIRM", "ESTABLISHED"}
}

// Sessions returns every neighbor's session, by neighbor address (none
// while the speaker is stopped).
func (s *Speaker) Sessions(ctx context.Context) []report.BGPSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		return nil
	}
	var out []report.BGPSession
	s.srv.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		st := p.GetState()
		addr := st.GetNeighborAddress()
		ss := report.BGPSession{Neighbor: s.name(addr), PeerASN: st.GetPeerAsn(), State: stateName(st.GetSessionState()), Flaps: st.GetFlops(), Since: s.changes[addr]}
		for _, a := range p.GetAfiSafis() {
			ss.Advertised += a.GetState().GetAdvertised()
			ss.Received += a.GetState().GetReceived()
		}
		out = append(out, ss)
	})
	slices.SortFunc(out, func(a, b report.BGPSession) int {
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
