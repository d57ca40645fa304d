// Package plan compiles a validated config.Config into an immutable Plan:
// references resolved to pointers and dense IDs, defaults applied, capacity
// precomputed. Every other package reads the Plan and never the raw config.
//
// The package is pure: no I/O, no clock, no randomness.
package plan

import (
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"time"

	"github.com/spillwaylb/spillway/internal/cdnpolicy"
	"github.com/spillwaylb/spillway/internal/config"
)

// Algorithm is a service load-balancing policy's loadBalancingAlgorithm.
type Algorithm uint8

// The supported algorithms.
const (
	WaterfallByRegion Algorithm = iota // the default
	SprayToRegion
	WaterfallByZone
)

// String returns the API name.
func (a Algorithm) String() string {
	switch a {
	case SprayToRegion:
		return "SPRAY_TO_REGION"
	case WaterfallByZone:
		return "WATERFALL_BY_ZONE"
	}
	return "WATERFALL_BY_REGION"
}

// Plan is a compiled configuration. It is immutable once built and safe for
// concurrent use.
type Plan struct {
	Config *config.Config

	Services      []*Service
	ServiceByName map[string]*Service
	// Buckets are the backend buckets by name (cdn.go).
	Buckets map[string]*Bucket
	Groups  []*Group
	// Endpoints are unique (address, health check) pairs: the unit of
	// health. Two services that share a group and a health check share
	// endpoints, so each endpoint is probed once.
	Endpoints    []*Endpoint
	HealthChecks []*HealthCheck

	// Regions lists every region the plan knows (from groups, frontends
	// and the regions list), sorted by name (a client region added by
	// WithClientRegion comes last); the index is the RegionID.
	Regions     []string
	RegionIndex map[string]int
	// Distance[a][b] is the proximity metric between regions a and b: the
	// round-trip time in ms, from regions[].rttMs, else the built-in table
	// of Google Cloud regions (KnownRTT), else estimated from coordinates
	// (FibreRTTMs); +Inf when unknown.
	Distance [][]float64
	// RegionalLayers[r] is region r's regional layer (regions[].
	// regionalLayer), where EDGE frontends forward its requests; nil for
	// a region without one.
	RegionalLayers []*config.RegionalLayer

	URLMaps   map[string]*URLMap
	Frontends []*Frontend

	// UndrainHold is how long a drained group must stay at or above 35%
	// healthy before it is undrained (60 s unless spillway.undrainHoldSec).
	UndrainHold time.Duration
	// DemandWindow is the window over which offered rates are measured.
	DemandWindow time.Duration
	// UndrainRamp is the gradual-failback period of an undrained group
	// (spillway.undrainRampSec; 0 = Google's step).
	UndrainRamp time.Duration
	// SecondLayerProxies is how many second-layer proxies of a region one
	// client reaches under WATERFALL_BY_REGION (spillway.secondLayerProxies,
	// default 8).
	SecondLayerProxies int
	// FidelityProfile is spillway.fidelityProfile (default DOCUMENTED).
	FidelityProfile string

	// retry holds the compiled retryPolicy of every route action of the
	// config's URL maps (RetryPolicy).
	retry map[*config.RetryPolicy]RetryPolicy
}

// HealthCheck is a compiled health check with defaults applied.
type HealthCheck struct {
	ID                 int
	Name               string
	Type               string // HTTP, HTTPS, HTTP2, TCP, GRPC, GRPC_WITH_TLS
	Interval, Timeout  time.Duration
	HealthyThreshold   int
	UnhealthyThreshold int
	Path, Host         string
	Response, Request  string
	ProxyHeader        string
	// GRPCService is grpcServiceName (GRPC, GRPC_WITH_TLS): the service
	// grpc.health.v1.Health/Check asks about.
	GRPCService string
	// Port is the fixed probe port; 0 means USE_SERVING_PORT.
	Port int
}

// Group is an instance group or a zonal network endpoint group.
type Group struct {
	ID     int
	Name   string
	Kind   string // "instanceGroup" or "networkEndpointGroup"
	Zone   string
	Region string
	// RegionID indexes Plan.Regions.
	RegionID int
}

// ZoneOrRegion is where the group's requests are counted and reported: its
// zone, or its region for a regional group (serverless and internet NEGs
// have no zone), as the lab places their backends.
func (g *Group) ZoneOrRegion() string {
	if g.Zone == "" {
		return g.Region
	}
	return g.Zone
}

// Endpoint is one backend address probed by one health check.
type Endpoint struct {
	ID   int
	Addr string // ip:port, what the proxy dials
	// Instance names the VM for instance groups; empty for NEGs.
	Instance    string
	Group       *Group
	HealthCheck *HealthCheck // nil: no health check, always healthy
	// ProbeAddr is the address probes go to (differs from Addr when the
	// health check has a fixed port).
	ProbeAddr string
	// Host is the DNS name the endpoint was resolved from (an
	// INTERNET_FQDN_PORT fqdn, a serverless base URL's host): the Host
	// header and TLS server name of proxied requests. Empty for
	// endpoints configured by IP address.
	Host string
	// TLS forces HTTPS to the endpoint whatever the service's protocol
	// (serverless endpoints: spillway.serverless base URLs are https).
	TLS bool
}

// Service is a compiled backend service.
type Service struct {
	ID        int
	Name      string
	Protocol  string
	Timeout   time.Duration
	Backends  []*Backend
	Algorithm Algorithm
	AutoDrain bool
	// FailoverThreshold is the failover threshold as a fraction: the
	// policy's failoverHealthThreshold (default 0.70); without a
	// serviceLbPolicy 0.50 for scheme EXTERNAL, else 0.70 (0.50 under
	// spillway.fidelityProfile SEED_000). ThresholdRule says which rule
	// gave it and why (docs/semantics.md §2.2).
	FailoverThreshold float64
	ThresholdRule     string
	HealthCheck       *HealthCheck
	// LocalityLbPolicy picks the endpoint inside a backend: ROUND_ROBIN
	// by default, MAGLEV when session affinity is set (Google's default).
	LocalityLbPolicy string
	// Affinity is the compiled sessionAffinity.
	Affinity Affinity
	// MinRingSize is consistentHash.minimumRingSize (default 1024).
	MinRingSize int
	PolicyName  string
	Config      *config.BackendService
	// CDN is the compiled cdnPolicy, nil when enableCDN is false.
	CDN *cdnpolicy.Policy
}

// HashPolicy reports whether the service picks endpoints by consistent
// hash (RING_HASH or MAGLEV), the only policies session affinity affects.
func (s *Service) HashPolicy() bool {
	return s.LocalityLbPolicy == "RING_HASH" || s.LocalityLbPolicy == "MAGLEV"
}

// AffinityKind is a backend service's sessionAffinity.
type AffinityKind uint8

// The supported session affinities.
const (
	AffinityNone AffinityKind = iota
	AffinityClientIP
	AffinityGeneratedCookie
	AffinityHTTPCookie
	AffinityHeaderField
)

// GeneratedCookieName is the cookie GENERATED_COOKIE affinity issues, and
// the HTTP_COOKIE cookie name when consistentHash.httpCookie.name is unset.
const GeneratedCookieName = "GCLB"

// Affinity is a compiled session affinity: what the proxy hashes.
type Affinity struct {
	Kind AffinityKind
	// Cookie, CookiePath and CookieTTL describe the cookie of
	// GENERATED_COOKIE ("GCLB", "/", affinityCookieTtlSec) and HTTP_COOKIE
	// (consistentHash.httpCookie, ttl defaulting to affinityCookieTtlSec).
	// A zero CookieTTL is a session cookie.
	Cookie     string
	CookiePath string
	CookieTTL  time.Duration
	// Header is the canonical consistentHash.httpHeaderName (HEADER_FIELD).
	Header string
}

// Backend is one backends[] entry: a group as seen by one service.
type Backend struct {
	Index     int // position in Service.Backends
	Service   *Service
	Group     *Group
	Preferred bool
	Mode      string // RATE or UTILIZATION (config rejects CONNECTION)
	Scaler    float64
	// Endpoints are the configured members (healthy or not).
	Endpoints []*Endpoint
	// Capacity is the RATE target in requests per second after the
	// capacity scaler; +Inf when the mode sets no rate limit.
	Capacity float64
	// Weight is the proportion weight used to split traffic among groups:
	// the scaled target capacity in the backend's own unit (rps,
	// utilization × members, or connections).
	Weight float64
	// TargetUtilization is a UTILIZATION backend's maxUtilization (0.8
	// by default) times its capacity scaler: the utilisation its
	// measured capacity is computed at (control.State.SetMeasuredCapacity).
	// 0 for other modes.
	TargetUtilization float64
}

// ZeroCapacity reports whether the backend can never take traffic
// (capacityScaler 0 or no members); such backends are never drain
// candidates but count in the 50% denominator.
func (b *Backend) ZeroCapacity() bool { return b.Weight == 0 }

// URLMap is a URL map with its default action compiled.
type URLMap struct {
	Name   string
	Config *config.URLMap
}

// Frontend is a compiled frontend.
type Frontend struct {
	Name     string
	Address  string
	Protocol string
	URLMap   *URLMap
	Region   string
	RegionID int // -1 when the frontend has no region
	// Layer is the frontend's proxy layer: "", config.LayerEdge or
	// config.LayerRegional; TrustedEdges a REGIONAL frontend's trusted
	// sources.
	Layer        string
	TrustedEdges []netip.Prefix
	Config       *config.Frontend
}

// Compile builds a Plan. The config must have passed Validate; Compile
// still returns an error for anything it cannot resolve.
func Compile(c *config.Config) (*Plan, error) { return CompileWith(c, Options{}) }

// Options are what Compile needs beyond the config.
type Options struct {
	// Resolved holds the addresses of the DNS names the config's
	// endpoints are named by (Names lists them); a name without
	// addresses gives no endpoints.
	Resolved map[string][]netip.Addr
	// SignedKeys holds the signed URL keys read from
	// spillway.signedUrlKeys[].keyFile, by backend and key name.
	SignedKeys map[string]map[string][]byte
	// Role and Region select the frontends of an instance that runs one
	// proxy layer (spillway serve --role, --region; see ServesFrontend).
	// "" keeps every frontend.
	Role, Region string
}

// ServesFrontend reports whether an instance of role (config.LayerEdge,
// config.LayerRegional, or "" for every layer) in region serves f: an
// edge serves every frontend but the REGIONAL ones; a regional instance
// every one but the EDGE ones, and of the REGIONAL ones those of its
// region (all when region is "").
func ServesFrontend(f *config.Frontend, role, region string) bool {
	switch role {
	case config.LayerEdge:
		return f.Layer != config.LayerRegional
	case config.LayerRegional:
		if f.Layer == config.LayerRegional {
			return region == "" || config.RefName(f.Region) == region
		}
		return f.Layer != config.LayerEdge
	}
	return true
}

// CompileWith is Compile with the DNS names' addresses.
func CompileWith(c *config.Config, o Options) (*Plan, error) {
	p := &Plan{
		Config:        c,
		ServiceByName: map[string]*Service{},
		RegionIndex:   map[string]int{},
		URLMaps:       map[string]*URLMap{},
		UndrainHold:   time.Duration(config.DefaultUndrainHoldSec) * time.Second,
		DemandWindow:  time.Second,

		SecondLayerProxies: config.DefaultSecondLayerProxies,
		FidelityProfile:    config.FidelityDocumented,
	}
	p.tune(c.Spillway)
	cc := newCompiler(p, c)
	cc.resolved = o.Resolved
	for i := range c.BackendServices {
		if err := cc.service(i, &c.BackendServices[i]); err != nil {
			return nil, err
		}
	}
	cc.compileCDN(c, o.SignedKeys)
	if err := p.compileFrontends(c, o.Role, o.Region); err != nil {
		return nil, err
	}
	p.compileRetryPolicies(c)
	return p, nil
}

// tune applies the spillway block's plan-wide settings.
func (p *Plan) tune(t *config.Tuning) {
	if t == nil {
		return
	}
	if t.SecondLayerProxies != nil {
		p.SecondLayerProxies = *t.SecondLayerProxies
	}
	if t.FidelityProfile != "" {
		p.FidelityProfile = t.FidelityProfile
	}
	if t.UndrainHoldSec != nil {
		p.UndrainHold = time.Duration(*t.UndrainHoldSec) * time.Second
	}
	if t.DemandWindowSec != nil {
		p.DemandWindow = time.Duration(*t.DemandWindowSec) * time.Second
	}
	if t.UndrainRampSec != nil {
		p.UndrainRamp = time.Duration(*t.UndrainRampSec) * time.Second
	}
}

// compiler is Compile's state while it compiles backend services: the
// config's objects by name, and the groups and endpoints made so far.
type compiler struct {
	p         *Plan
	hcs       map[string]*HealthCheck
	policies  map[string]*config.ServiceLbPolicy
	negs      map[string]*config.NetworkEndpointGroup
	igs       map[string]*config.InstanceGroup
	groups    map[string]*Group
	endpoints map[string]*Endpoint
	resolved  map[string][]netip.Addr
}

// newCompiler compiles c's health checks and regions into p and indexes
// the objects backend services refer to.
func newCompiler(p *Plan, c *config.Config) *compiler {
	cc := &compiler{
		p:         p,
		hcs:       map[string]*HealthCheck{},
		policies:  map[string]*config.ServiceLbPolicy{},
		negs:      map[string]*config.NetworkEndpointGroup{},
		igs:       map[string]*config.InstanceGroup{},
		groups:    map[string]*Group{},
		endpoints: map[string]*Endpoint{},
	}
	for i := range c.HealthChecks {
		hc := compileHealthCheck(&c.HealthChecks[i])
		hc.ID = len(p.HealthChecks)
		p.HealthChecks = append(p.HealthChecks, hc)
		cc.hcs[hc.Name] = hc
	}
	for i := range c.ServiceLbPolicies {
		cc.policies[c.ServiceLbPolicies[i].Name] = &c.ServiceLbPolicies[i]
	}
	cc.regions(c)
	return cc
}

// regions sets p's regions, from groups, frontends and the regions list,
// and their distances, indexing the groups on the way.
func (cc *compiler) regions(c *config.Config) {
	p := cc.p
	regionSet := map[string]bool{}
	for i := range c.NetworkEndpointGroups {
		g := &c.NetworkEndpointGroups[i]
		cc.negs[g.Name] = g
		regionSet[g.RegionName()] = true
	}
	for i := range c.InstanceGroups {
		g := &c.InstanceGroups[i]
		cc.igs[g.Name] = g
		regionSet[g.RegionName()] = true
	}
	for _, f := range c.Frontends {
		if f.Region != "" {
			regionSet[config.RefName(f.Region)] = true
		}
	}
	for _, r := range c.Regions {
		regionSet[r.Name] = true
	}
	for r := range regionSet {
		p.Regions = append(p.Regions, r)
	}
	sort.Strings(p.Regions)
	for i, r := range p.Regions {
		p.RegionIndex[r] = i
	}
	p.Distance = distances(p.Regions, c.Regions)
	p.RegionalLayers = make([]*config.RegionalLayer, len(p.Regions))
	for i := range c.Regions {
		if l := c.Regions[i].RegionalLayer; l != nil {
			p.RegionalLayers[p.RegionIndex[c.Regions[i].Name]] = l
		}
	}
}

// group returns the group named name, making it on first use.
func (cc *compiler) group(name string) (*Group, error) {
	if g, ok := cc.groups[name]; ok {
		return g, nil
	}
	var g *Group
	if n, ok := cc.negs[name]; ok {
		g = &Group{Name: name, Kind: "networkEndpointGroup", Zone: n.Zone, Region: n.RegionName()}
	} else if ig, ok := cc.igs[name]; ok {
		g = &Group{Name: name, Kind: "instanceGroup", Zone: ig.Zone, Region: ig.RegionName()}
	} else {
		return nil, fmt.Errorf("unknown group %q", name)
	}
	g.ID = len(cc.p.Groups)
	g.RegionID = cc.p.RegionIndex[g.Region]
	cc.p.Groups = append(cc.p.Groups, g)
	cc.groups[name] = g
	return g, nil
}

// endpoint returns the endpoint of addr in g checked by hc, making it on
// first use: services that share a group and a health check share it.
func (cc *compiler) endpoint(g *Group, addr, instance string, hc *HealthCheck) *Endpoint {
	key := addr + "|" + g.Name
	if hc != nil {
		key += "|" + hc.Name
	}
	if e, ok := cc.endpoints[key]; ok {
		return e
	}
	e := &Endpoint{ID: len(cc.p.Endpoints), Addr: addr, Instance: instance, Group: g, HealthCheck: hc, ProbeAddr: addr}
	if g.Kind == "networkEndpointGroup" {
		if n := cc.negs[g.Name]; n.NetworkEndpointType == "INTERNET_FQDN_PORT" || n.NetworkEndpointType == "SERVERLESS" {
			e.Host = instance
			e.TLS = n.NetworkEndpointType == "SERVERLESS"
		}
	}
	if hc != nil && hc.Port != 0 {
		host, _ := splitHostPort(addr)
		e.ProbeAddr = joinHostPort(host, hc.Port)
	}
	cc.p.Endpoints = append(cc.p.Endpoints, e)
	cc.endpoints[key] = e
	return e
}

// service compiles backendServices[i] into p.
func (cc *compiler) service(i int, bs *config.BackendService) error {
	s := &Service{
		ID:          len(cc.p.Services),
		Name:        bs.Name,
		Protocol:    orDefault(bs.Protocol, "HTTP"),
		Timeout:     time.Duration(intOr(bs.TimeoutSec, config.DefaultBackendTimeoutSec)) * time.Second,
		Affinity:    compileAffinity(bs),
		MinRingSize: config.DefaultMinimumRingSize,
		Config:      bs,
	}
	s.LocalityLbPolicy = orDefault(bs.LocalityLbPolicy, "ROUND_ROBIN")
	if bs.LocalityLbPolicy == "" && s.Affinity.Kind != AffinityNone {
		s.LocalityLbPolicy = "MAGLEV"
	}
	if ch := bs.ConsistentHash; ch != nil && ch.MinimumRingSize != nil && *ch.MinimumRingSize > 0 {
		s.MinRingSize = int(*ch.MinimumRingSize)
	}
	if len(bs.HealthChecks) > 0 {
		s.HealthCheck = cc.hcs[config.RefName(bs.HealthChecks[0])]
	}
	if bs.ServiceLbPolicy != "" {
		pol := cc.policies[config.RefName(bs.ServiceLbPolicy)]
		if pol == nil {
			return fmt.Errorf("backendServices[%d].serviceLbPolicy: unknown policy %q", i, bs.ServiceLbPolicy)
		}
		applyServiceLbPolicy(s, pol)
	} else {
		s.FailoverThreshold, s.ThresholdRule = noPolicyThreshold(bs.LoadBalancingScheme, cc.p.FidelityProfile)
	}
	portName := orDefault(bs.PortName, "http")
	for j := range bs.Backends {
		b, err := cc.backend(s, j, &bs.Backends[j], portName)
		if err != nil {
			return fmt.Errorf("backendServices[%d].backends[%d].group: %w", i, j, err)
		}
		s.Backends = append(s.Backends, b)
	}
	cc.p.Services = append(cc.p.Services, s)
	cc.p.ServiceByName[s.Name] = s
	return nil
}

// applyServiceLbPolicy sets what a serviceLbPolicy decides of s.
func applyServiceLbPolicy(s *Service, pol *config.ServiceLbPolicy) {
	s.PolicyName = pol.Name
	switch pol.LoadBalancingAlgorithm {
	case "SPRAY_TO_REGION":
		s.Algorithm = SprayToRegion
	case "WATERFALL_BY_ZONE":
		s.Algorithm = WaterfallByZone
	}
	s.AutoDrain = pol.AutoCapacityDrain != nil && pol.AutoCapacityDrain.Enable
	s.FailoverThreshold = float64(config.DefaultFailoverHealthThreshold) / 100
	s.ThresholdRule = "serviceLbPolicy " + pol.Name + " sets no failoverHealthThreshold: Google's documented default, 70"
	if fc := pol.FailoverConfig; fc != nil && fc.FailoverHealthThreshold != nil {
		s.FailoverThreshold = float64(*fc.FailoverHealthThreshold) / 100
		s.ThresholdRule = "failoverConfig.failoverHealthThreshold of serviceLbPolicy " + pol.Name
	}
}

// noPolicyThreshold is the failover threshold of a backend service
// without a serviceLbPolicy, and the rule that gives it: Google documents
// 50 for the classic load balancer (EXTERNAL) and 70 for the others;
// seed 000 measured 50 for EXTERNAL_MANAGED, which the SEED_000 fidelity
// profile keeps (docs/semantics.md §2.2).
func noPolicyThreshold(scheme, profile string) (float64, string) {
	switch {
	case scheme == "EXTERNAL":
		return float64(config.ClassicFailoverHealthThreshold) / 100,
			"no serviceLbPolicy, loadBalancingScheme EXTERNAL (the classic Application Load Balancer): Google's documented default, 50"
	case profile == config.FidelitySeed000:
		return float64(config.Seed000NoPolicyFailoverHealthThreshold) / 100,
			"no serviceLbPolicy, spillway.fidelityProfile SEED_000: 50, as seed 000's no-policy rows measured"
	}
	return float64(config.DefaultFailoverHealthThreshold) / 100,
		"no serviceLbPolicy, loadBalancingScheme EXTERNAL_MANAGED: Google's documented default, 70 (spillway.fidelityProfile SEED_000 gives the 50 seed 000 measured)"
}

// backend compiles backends[j] of service s; an error is the group's.
func (cc *compiler) backend(s *Service, j int, be *config.Backend, portName string) (*Backend, error) {
	g, err := cc.group(config.RefName(be.Group))
	if err != nil {
		return nil, err
	}
	b := &Backend{Index: j, Service: s, Group: g, Preferred: be.Preference == "PREFERRED", Scaler: 1}
	if be.CapacityScaler != nil {
		b.Scaler = *be.CapacityScaler
	}
	if n, ok := cc.negs[g.Name]; ok {
		b.Endpoints = cc.negEndpoints(g, n, s.HealthCheck)
		b.Mode = orDefault(be.BalancingMode, "RATE")
	} else {
		ig := cc.igs[g.Name]
		port := namedPort(ig, portName)
		for _, in := range ig.Instances {
			b.Endpoints = append(b.Endpoints, cc.endpoint(g, joinHostPort(in.IPAddress, port), in.Name, s.HealthCheck))
		}
		b.Mode = orDefault(be.BalancingMode, "UTILIZATION")
	}
	b.Capacity, b.Weight = capacity(be, b.Mode, len(b.Endpoints), b.Scaler)
	if b.Mode == "UTILIZATION" {
		b.TargetUtilization = 0.8 * b.Scaler
		if be.MaxUtilization != nil {
			b.TargetUtilization = *be.MaxUtilization * b.Scaler
		}
	}
	return b, nil
}

// namedPort returns the port an instance group names portName (the last
// such), 80 when it names none.
func namedPort(ig *config.InstanceGroup, portName string) int {
	port := 0
	for _, np := range ig.NamedPorts {
		if np.Name == portName {
			port = np.Port
		}
	}
	if port == 0 {
		port = 80
	}
	return port
}

// compileFrontends compiles c's URL maps, and the frontends an instance
// of role in region serves, into p.
func (p *Plan) compileFrontends(c *config.Config, role, region string) error {
	for i := range c.URLMaps {
		m := &c.URLMaps[i]
		p.URLMaps[m.Name] = &URLMap{Name: m.Name, Config: m}
	}
	for i := range c.Frontends {
		f := &c.Frontends[i]
		if !ServesFrontend(f, role, region) {
			continue
		}
		fe := &Frontend{Name: f.Name, Address: f.Address, Protocol: orDefault(f.Protocol, "HTTP"), Region: config.RefName(f.Region), RegionID: -1, Config: f}
		if f.URLMap != "" {
			fe.URLMap = p.URLMaps[config.RefName(f.URLMap)]
			if fe.URLMap == nil {
				return fmt.Errorf("frontends[%d].urlMap: unknown URL map %q", i, f.URLMap)
			}
		}
		if f.Region != "" {
			fe.RegionID = p.RegionIndex[fe.Region]
		}
		fe.Layer = f.Layer
		for _, e := range f.TrustedEdges {
			if pfx, ok := config.ParseTrustedEdge(e); ok {
				fe.TrustedEdges = append(fe.TrustedEdges, pfx)
			}
		}
		p.Frontends = append(p.Frontends, fe)
	}
	return nil
}

// compileAffinity compiles a backend service's sessionAffinity.
func compileAffinity(bs *config.BackendService) Affinity {
	var a Affinity
	ttl := time.Duration(intOr(bs.AffinityCookieTTLSec, 0)) * time.Second
	switch bs.SessionAffinity {
	case "CLIENT_IP":
		a.Kind = AffinityClientIP
	case "GENERATED_COOKIE":
		a = Affinity{Kind: AffinityGeneratedCookie, Cookie: GeneratedCookieName, CookiePath: "/", CookieTTL: ttl}
	case "HTTP_COOKIE":
		a = Affinity{Kind: AffinityHTTPCookie, Cookie: GeneratedCookieName, CookiePath: "/", CookieTTL: ttl}
		if ch := bs.ConsistentHash; ch != nil && ch.HTTPCookie != nil {
			c := ch.HTTPCookie
			a.Cookie = orDefault(c.Name, a.Cookie)
			a.CookiePath = orDefault(c.Path, a.CookiePath)
			if c.TTL != nil {
				a.CookieTTL = time.Duration(c.TTL.Seconds)*time.Second + time.Duration(c.TTL.Nanos)
			}
		}
	case "HEADER_FIELD":
		a.Kind = AffinityHeaderField
		if ch := bs.ConsistentHash; ch != nil {
			a.Header = canonicalHeader(ch.HTTPHeaderName)
		}
	}
	return a
}

// canonicalHeader is textproto.CanonicalMIMEHeaderKey for the ASCII
// header names config accepts ("x-user" -> "X-User").
func canonicalHeader(s string) string {
	b := []byte(s)
	upper := true
	for i, c := range b {
		switch {
		case upper && 'a' <= c && c <= 'z':
			b[i] = c - ('a' - 'A')
		case !upper && 'A' <= c && c <= 'Z':
			b[i] = c + ('a' - 'A')
		}
		upper = c == '-'
	}
	return string(b)
}

// capacity returns the RATE limit (rps, +Inf when none) and the proportion
// weight of a backend with n configured members.
func capacity(be *config.Backend, mode string, n int, scaler float64) (rate, weight float64) {
	nf := float64(n)
	rate = math.Inf(1)
	switch {
	case be.MaxRate != nil:
		rate = float64(*be.MaxRate)
	case be.MaxRatePerInstance != nil:
		rate = *be.MaxRatePerInstance * nf
	case be.MaxRatePerEndpoint != nil:
		rate = *be.MaxRatePerEndpoint * nf
	}
	if !math.IsInf(rate, 1) {
		rate *= scaler
	}
	switch mode {
	case "RATE":
		if math.IsInf(rate, 1) {
			weight = nf * scaler
		} else {
			weight = rate
		}
	default: // UTILIZATION
		u := 0.8
		if be.MaxUtilization != nil {
			u = *be.MaxUtilization
		}
		weight = u * nf * scaler
	}
	if n == 0 || scaler == 0 {
		return 0, 0
	}
	return rate, weight
}

func compileHealthCheck(h *config.HealthCheck) *HealthCheck {
	hc := &HealthCheck{
		Name:               h.Name,
		Type:               orDefault(h.Type, "HTTP"),
		Interval:           time.Duration(intOr(h.CheckIntervalSec, config.DefaultCheckIntervalSec)) * time.Second,
		Timeout:            time.Duration(intOr(h.TimeoutSec, config.DefaultTimeoutSec)) * time.Second,
		HealthyThreshold:   intOr(h.HealthyThreshold, config.DefaultHealthyThreshold),
		UnhealthyThreshold: intOr(h.UnhealthyThreshold, config.DefaultUnhealthyThreshold),
		Path:               "/",
	}
	if h.CheckIntervalMs != nil {
		hc.Interval = time.Duration(*h.CheckIntervalMs) * time.Millisecond
	}
	if h.TimeoutMs != nil {
		hc.Timeout = time.Duration(*h.TimeoutMs) * time.Millisecond
	}
	if hc.Timeout > hc.Interval {
		hc.Timeout = hc.Interval
	}
	var hh *config.HTTPHealthCheck
	defPort := 80
	switch hc.Type {
	case "HTTP":
		hh = h.HTTPHealthCheck
	case "HTTPS":
		hh, defPort = h.HTTPSHealthCheck, 443
	case "HTTP2":
		hh, defPort = h.HTTP2HealthCheck, 443
	case "TCP":
		if t := h.TCPHealthCheck; t != nil {
			hc.Request, hc.Response, hc.ProxyHeader = t.Request, t.Response, t.ProxyHeader
			hc.Port = portSpec(t.Port, t.PortSpecification, defPort)
		}
		return hc
	case "GRPC", "GRPC_WITH_TLS":
		compileGRPC(hc, h)
		return hc
	}
	if hh == nil {
		return hc // the serving port (hc.Port 0): see portSpec
	}
	if hh.RequestPath != "" {
		hc.Path = hh.RequestPath
	}
	hc.Host, hc.Response, hc.ProxyHeader = hh.Host, hh.Response, hh.ProxyHeader
	hc.Port = portSpec(hh.Port, hh.PortSpecification, defPort)
	return hc
}

// compileGRPC fills a gRPC health check's service and port (443 for
// GRPC_WITH_TLS, 80 for GRPC when USE_FIXED_PORT names no port, as for
// HTTPS and HTTP).
func compileGRPC(hc *HealthCheck, h *config.HealthCheck) {
	def := 80
	if hc.Type == "GRPC_WITH_TLS" {
		def = 443
	}
	hc.Path = ""
	g := h.GRPCBlock()
	if g == nil {
		return // the serving port (hc.Port 0): see portSpec
	}
	hc.GRPCService = g.GRPCServiceName
	hc.Port = portSpec(g.Port, g.PortSpecification, def)
}

// portSpec returns the fixed probe port, or 0 for USE_SERVING_PORT.
// Spillway decision: with neither port nor portSpecification set, probes
// go to the serving port (Google defaults to port 80, which on a loopback
// lab almost never is the backend's port; see docs/semantics.md §4). A
// health check without its type's block is the same: the serving port.
func portSpec(port *int, spec string, def int) int {
	switch {
	case spec == "USE_SERVING_PORT":
		return 0
	case port != nil:
		return *port
	case spec == "USE_FIXED_PORT":
		return def
	}
	return 0
}

func intOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func joinHostPort(host string, port int) string {
	for i := 0; i < len(host); i++ {
		if host[i] == ':' {
			return "[" + host + "]:" + strconv.Itoa(port)
		}
	}
	return host + ":" + strconv.Itoa(port)
}

func splitHostPort(addr string) (string, string) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			h := addr[:i]
			if len(h) > 1 && h[0] == '[' {
				h = h[1 : len(h)-1]
			}
			return h, addr[i+1:]
		}
	}
	return addr, ""
}
