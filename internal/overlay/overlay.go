// Package overlay is Spillway's runtime control: drains and capacity or
// weight changes an operator makes on a running instance (spillway ctl,
// the admin API's /overlay), kept apart from the config file and applied
// on top of every config the instance loads, so they survive reloads.
// Each change is an Entry; a Set is the instance's (or the fleet's)
// current entries.
//
// An entry changes the config itself, the way an operator editing the
// file would, so the engine sees an overlay drain exactly as it sees a
// drain written in the config (and spillway simulate, given the same
// change in the file, predicts the same split):
//   - draining a backend service sets capacityScaler 0 on every backend of
//     it; draining a group sets it on the group's backends (of one service,
//     or of every service that uses it);
//   - capacityScaler X sets X the same way;
//   - weight W sets the weight of every weightedBackendServices[] entry of
//     the URL maps that names the service;
//   - draining an endpoint removes it from its instance group or network
//     endpoint group (Google Cloud's way of taking one VM or endpoint out:
//     its connections and requests in flight finish, it gets no new
//     request, it is no longer probed).
//
// The package is pure: times come in as arguments.
package overlay

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

// Action is what an entry does.
type Action string

// The actions.
const (
	// Drain takes the target out of service: capacityScaler 0 for a
	// service or group, removal from its group for an endpoint.
	Drain Action = "DRAIN"
	// CapacityScaler sets the capacityScaler of a service's or group's
	// backends (Value, 0 or 0.1-1).
	CapacityScaler Action = "CAPACITY_SCALER"
	// Weight sets a service's weight in the URL maps' weighted splits
	// (Value, 0-1000).
	Weight Action = "WEIGHT"
)

// Target names what an entry acts on: a backend service, a group (an
// instance group or a network endpoint group, by name) as a backend of
// Service (or of every service when Service is empty), or an endpoint
// (an IP address, IP:port, or an instance's name) of Group (or of any
// group when Group is empty).
type Target struct {
	Service  string `json:"service,omitempty"`
	Group    string `json:"group,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
}

// String names the target as the entry IDs and the messages do, e.g.
// "service=bs-web group=ig-a".
func (t Target) String() string {
	var parts []string
	for _, kv := range [][2]string{{"service", t.Service}, {"group", t.Group}, {"endpoint", t.Endpoint}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	return strings.Join(parts, " ")
}

// Entry is one runtime change.
type Entry struct {
	// ID identifies the entry: its action and target
	// ("DRAIN service=bs-web group=ig-a"). Setting an entry with the same
	// ID replaces it.
	ID string `json:"id"`
	Target
	Action Action `json:"action"`
	// Value is the capacityScaler or the weight (unused for Drain).
	Value float64 `json:"value,omitempty"`
	// Actor is who set it (as the client said: spillway ctl sends
	// user@host), Remote the address the request came from.
	Actor  string `json:"actor,omitempty"`
	Remote string `json:"remote,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Set is when it was set; Expires when it ends by itself (zero:
	// never).
	Set     time.Time `json:"set"`
	Expires time.Time `json:"expires,omitzero"`
}

// Key returns the entry's ID as computed from its action and target.
func (e *Entry) Key() string { return string(e.Action) + " " + e.Target.String() }

// Expired reports whether the entry has ended by now.
func (e *Entry) Expired(now time.Time) bool {
	return !e.Expires.IsZero() && !now.Before(e.Expires)
}

// Check checks an entry's action, target and value; the error names the
// field and the fix.
func (e *Entry) Check() error {
	t := e.Target
	if t.Service == "" && t.Group == "" && t.Endpoint == "" {
		return fmt.Errorf("target: empty (fix: name a --service, a --group or an --endpoint)")
	}
	switch e.Action {
	case Drain:
	case CapacityScaler:
		if t.Endpoint != "" {
			return fmt.Errorf("capacityScaler: an endpoint has no capacityScaler of its own, its group has (fix: drain the endpoint, or set the capacityScaler of --group)")
		}
		if v := e.Value; v != 0 && (v < 0.1 || v > 1) || v != v {
			return fmt.Errorf("capacityScaler %s: out of range (fix: use 0 to drain, or a value between 0.1 and 1.0)", strconv.FormatFloat(v, 'g', -1, 64))
		}
	case Weight:
		if t.Group != "" || t.Endpoint != "" || t.Service == "" {
			return fmt.Errorf("weight: a weight is a backend service's share of a URL map's weightedBackendServices (fix: give --service alone; for a group use --capacity-scaler)")
		}
		if v := e.Value; v < 0 || v > 1000 || v != float64(int(v)) {
			return fmt.Errorf("weight %s: want a whole number from 0 to 1000, as weightedBackendServices[].weight", strconv.FormatFloat(v, 'g', -1, 64))
		}
	default:
		return fmt.Errorf("action %q: want DRAIN, CAPACITY_SCALER or WEIGHT", e.Action)
	}
	return nil
}

// Set is the current entries, ordered by ID.
type Set struct {
	Entries []Entry `json:"entries"`
}

// Put returns s with e added, replacing the entry with e's ID.
func (s Set) Put(e Entry) Set {
	e.ID = e.Key()
	out := Set{Entries: slices.DeleteFunc(slices.Clone(s.Entries), func(x Entry) bool { return x.ID == e.ID })}
	out.Entries = append(out.Entries, e)
	slices.SortFunc(out.Entries, func(a, b Entry) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Remove returns s without the entries match selects, and those.
func (s Set) Remove(match func(*Entry) bool) (Set, []Entry) {
	var out Set
	var gone []Entry
	for _, e := range s.Entries {
		if match(&e) {
			gone = append(gone, e)
			continue
		}
		out.Entries = append(out.Entries, e)
	}
	return out, gone
}

// Expire returns s without the entries expired by now, and those.
func (s Set) Expire(now time.Time) (Set, []Entry) {
	return s.Remove(func(e *Entry) bool { return e.Expired(now) })
}

// NextExpiry returns the earliest expiry of s's entries (zero if none).
func (s Set) NextExpiry() time.Time {
	var next time.Time
	for _, e := range s.Entries {
		if !e.Expires.IsZero() && (next.IsZero() || e.Expires.Before(next)) {
			next = e.Expires
		}
	}
	return next
}

// Equal reports whether a and b hold the same entries.
func Equal(a, b Set) bool {
	return slices.Equal(a.Entries, b.Entries)
}

// Apply returns a copy of cfg with the entries of s that have not
// expired by now applied (cfg is not changed), and a problem for each
// entry whose target cfg lacks: such an entry is skipped, not an error,
// so that a config that dropped a service still loads. Capacity and
// weight entries apply first and drains last, so a drain wins.
func Apply(cfg *config.Config, s Set, now time.Time) (*config.Config, []string, error) {
	out, err := clone(cfg)
	if err != nil {
		return nil, nil, err
	}
	var problems []string
	order := slices.Clone(s.Entries)
	slices.SortStableFunc(order, func(a, b Entry) int {
		return boolInt(a.Action == Drain) - boolInt(b.Action == Drain)
	})
	for _, e := range order {
		if e.Expired(now) {
			continue
		}
		if p := apply(out, &e); p != "" {
			problems = append(problems, fmt.Sprintf("%s: %s; the entry is kept but changes nothing (fix: spillway ctl clear %q, or restore it in the config)", e.ID, p, e.ID))
		}
	}
	return out, problems, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// clone deep-copies a config through its JSON form.
func clone(cfg *config.Config) (*config.Config, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("overlay: copy the config: %w", err)
	}
	out := &config.Config{}
	if err := json.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("overlay: copy the config: %w", err)
	}
	out.File = cfg.File
	return out, nil
}

// apply applies one entry to cfg; it returns what is missing, or "".
func apply(cfg *config.Config, e *Entry) string {
	switch {
	case e.Action == Weight:
		return setWeight(cfg, e.Service, int(e.Value))
	case e.Endpoint != "":
		return removeEndpoint(cfg, e.Group, e.Endpoint)
	}
	v := e.Value
	if e.Action == Drain {
		v = 0
	}
	return setScaler(cfg, e.Service, e.Group, v)
}

// setScaler sets capacityScaler v on the backends of service (every
// service when "") whose group is group (every backend when "").
func setScaler(cfg *config.Config, service, group string, v float64) string {
	found := false
	for i := range cfg.BackendServices {
		bs := &cfg.BackendServices[i]
		if service != "" && bs.Name != service {
			continue
		}
		for j := range bs.Backends {
			b := &bs.Backends[j]
			if group != "" && config.RefName(b.Group) != group {
				continue
			}
			b.CapacityScaler = &v
			found = true
		}
	}
	if found {
		return ""
	}
	return missing(service, group)
}

func missing(service, group string) string {
	switch {
	case group == "":
		return fmt.Sprintf("the config has no backend service %s", service)
	case service == "":
		return fmt.Sprintf("no backend service of the config has group %s as a backend", group)
	}
	return fmt.Sprintf("backend service %s has no backend with group %s in the config", service, group)
}

// setWeight sets weight w on every weightedBackendServices[] entry that
// names service.
func setWeight(cfg *config.Config, service string, w int) string {
	found := false
	set := func(ra *config.HTTPRouteAction) {
		if ra == nil {
			return
		}
		for i := range ra.WeightedBackendServices {
			if config.RefName(ra.WeightedBackendServices[i].BackendService) == service {
				ra.WeightedBackendServices[i].Weight = w
				found = true
			}
		}
	}
	for i := range cfg.URLMaps {
		m := &cfg.URLMaps[i]
		set(m.DefaultRouteAction)
		for j := range m.PathMatchers {
			pm := &m.PathMatchers[j]
			set(pm.DefaultRouteAction)
			for k := range pm.PathRules {
				set(pm.PathRules[k].RouteAction)
			}
			for k := range pm.RouteRules {
				set(pm.RouteRules[k].RouteAction)
			}
		}
	}
	if found {
		return ""
	}
	return fmt.Sprintf("no URL map splits traffic to backend service %s with weightedBackendServices", service)
}

// removeEndpoint removes the members of group (any group when "") that
// endpoint names: an IP address (every port), IP:port, or an instance's
// name.
func removeEndpoint(cfg *config.Config, group, endpoint string) string {
	found := false
	for i := range cfg.InstanceGroups {
		g := &cfg.InstanceGroups[i]
		if group != "" && g.Name != group {
			continue
		}
		n := len(g.Instances)
		g.Instances = slices.DeleteFunc(g.Instances, func(in config.Instance) bool {
			return in.Name == endpoint || in.IPAddress == endpoint || hostOf(endpoint) == in.IPAddress
		})
		found = found || len(g.Instances) < n
	}
	for i := range cfg.NetworkEndpointGroups {
		g := &cfg.NetworkEndpointGroups[i]
		if group != "" && g.Name != group {
			continue
		}
		n := len(g.Endpoints)
		g.Endpoints = slices.DeleteFunc(g.Endpoints, func(ne config.NetworkEndpoint) bool {
			return negMatch(ne, g.DefaultPort, endpoint)
		})
		found = found || len(g.Endpoints) < n
	}
	if found {
		return ""
	}
	if group != "" {
		return fmt.Sprintf("group %s has no member %s in the config", group, endpoint)
	}
	return fmt.Sprintf("no group of the config has a member %s", endpoint)
}

// hostOf returns the host of host:port, or "" when s has no port.
func hostOf(s string) string {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return ""
	}
	return ap.Addr().String()
}

// negMatch reports whether endpoint (IP, or IP:port) names ne.
func negMatch(ne config.NetworkEndpoint, defPort int, endpoint string) bool {
	if ne.IPAddress == endpoint || ne.Instance != "" && ne.Instance == endpoint {
		return true
	}
	port := ne.Port
	if port == 0 {
		port = defPort
	}
	a, err := netip.ParseAddr(ne.IPAddress)
	return err == nil && netip.AddrPortFrom(a, uint16(port)).String() == endpoint
}
