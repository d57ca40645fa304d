package config

import "strings"

// DNSZone is one dnsZones[] entry (a Spillway extension): a zone Spillway
// serves authoritatively on its protocol: DNS frontends. It holds static
// records and GSLB names, whose answers follow health, weights, priority
// tiers and the client's location. docs/dns.md documents every field.
//
// Names inside a zone (records[].name, gslbNames[].name) may be written
// relative to the zone ("www"), absolute ("www.gslb.example.") or as "@"
// for the zone apex. Names are case-insensitive.
type DNSZone struct {
	// Name is the zone's domain, e.g. "gslb.example." (the trailing dot is
	// optional).
	Name string `json:"name"`
	// SOA is the zone's start of authority; absent fields take the
	// defaults in DNSDefault* (mname defaults to the first name server,
	// rname to hostmaster.ZONE).
	SOA *DNSSOA `json:"soa,omitempty"`
	// NameServers are the zone's NS records (at least one).
	NameServers []string `json:"nameServers,omitempty"`
	// Records are static resource record sets.
	Records []DNSRecord `json:"records,omitempty"`
	// GSLBNames are names whose A/AAAA answers are decided per query.
	GSLBNames []GSLBName `json:"gslbNames,omitempty"`
	// DNSSEC signs the zone's answers online (a Spillway extension; see
	// DNSZoneDNSSEC).
	DNSSEC *DNSZoneDNSSEC `json:"dnssec,omitempty"`
	// Transfer lets secondaries transfer the zone's static part (AXFR,
	// IXFR) and be notified of changes; see dns_transfer.go.
	Transfer *DNSTransfer `json:"transfer,omitempty"`
	// ZoneFile reads more static records from an RFC 1035 master file
	// (a Spillway extension; see DNSZoneFile). A record set may be in
	// records or in the file, not in both; use StaticRecords, ZoneSOA
	// and ZoneNameServers for the zone's whole static part.
	ZoneFile *DNSZoneFile `json:"zoneFile,omitempty"`

	// file is what ZoneFile held, read by validation (zonefile.go).
	file *zoneFileData
}

// DNSSOA is dnsZones[].soa. Times are in seconds.
type DNSSOA struct {
	MName   string `json:"mname,omitempty"`
	RName   string `json:"rname,omitempty"`
	Serial  *int64 `json:"serial,omitempty"`
	Refresh *int   `json:"refresh,omitempty"`
	Retry   *int   `json:"retry,omitempty"`
	Expire  *int   `json:"expire,omitempty"`
	// Minimum is the negative-caching TTL (RFC 2308).
	Minimum *int `json:"minimum,omitempty"`
}

// DNSRecord is one static resource record set, in the shape of Cloud DNS
// resourceRecordSets: rrdatas are in zone-file presentation format, e.g.
// "10 mail.example." for MX or "\"v=spf1 -all\"" for TXT.
type DNSRecord struct {
	Name string `json:"name"`
	// Type is A, AAAA, CNAME, TXT, MX or SRV.
	Type string `json:"type"`
	// TTL in seconds; default DNSDefaultRecordTTL.
	TTL     *int     `json:"ttl,omitempty"`
	Rrdatas []string `json:"rrdatas,omitempty"`
}

// GSLBName is dnsZones[].gslbNames[]: a name answered from a pool of
// members (or from Spillway's own frontends for a backend service)
// according to a policy and health.
type GSLBName struct {
	Name string `json:"name"`
	// Policy is WEIGHTED (default), FAILOVER, GEO or LATENCY.
	Policy string `json:"policy,omitempty"`
	// AnswerCount is how many addresses an answer holds (default 1).
	AnswerCount *int `json:"answerCount,omitempty"`
	// TTL of answers in seconds (default DNSDefaultGSLBTTL).
	TTL *int `json:"ttl,omitempty"`
	// TransitionTTL is the TTL used while the name's answers are changing:
	// a member changed state within the last TTL seconds, or is ramping
	// back (default DNSDefaultTransitionTTL).
	TransitionTTL *int `json:"transitionTtl,omitempty"`
	// Pool lists the members; exactly one of Pool and BackendService.
	Pool *GSLBPool `json:"pool,omitempty"`
	// BackendService answers with Spillway's own HTTP/HTTPS frontends, a
	// region's frontends while the service has healthy capacity there.
	BackendService string `json:"backendService,omitempty"`
	// Failback shapes how a recovered member's weight returns.
	Failback *GSLBFailback `json:"failback,omitempty"`
	// Locations map client subnets (EDNS Client Subnet, else the
	// resolver's address), or the country or continent geoDatabase gives
	// them, to regions, for the GEO and LATENCY policies.
	Locations []GSLBLocation `json:"locations,omitempty"`
	// GeoDatabase is the path of a MaxMind-format database (GeoLite2 or
	// GeoIP2 City or Country, or any .mmdb with the same location fields)
	// that places clients no Locations CIDR matches, for the GEO and
	// LATENCY policies.
	GeoDatabase string `json:"geoDatabase,omitempty"`
	// Passive tunes the passive signal from Spillway's own proxy for
	// members that are Spillway frontends.
	Passive *GSLBPassive `json:"passive,omitempty"`
}

// GSLBPassive is gslbNames[].passive: members that are Spillway's own
// HTTP/HTTPS frontends (backendService names, and pool members whose
// address is such a frontend's IP) have their weight halved while the
// real requests those frontends proxy fail or are slow.
type GSLBPassive struct {
	// Enable turns the passive signal on or off (default true).
	Enable *bool `json:"enable,omitempty"`
	// WindowSec is the sliding window requests are measured over
	// (default DNSDefaultPassiveWindowSec).
	WindowSec *int `json:"windowSec,omitempty"`
	// MaxErrorRate is the error rate (0..1; 5xx, connect failures and
	// timeouts) above which the weight is halved (default
	// DNSDefaultPassiveMaxErrorRate).
	MaxErrorRate *float64 `json:"maxErrorRate,omitempty"`
	// MaxP95LatencyMs is the 95th percentile latency above which the
	// weight is halved (default DNSDefaultPassiveMaxP95LatencyMs).
	MaxP95LatencyMs *int `json:"maxP95LatencyMs,omitempty"`
	// MinRequests is how many requests a window needs before it is
	// judged (default DNSDefaultPassiveMinRequests).
	MinRequests *int `json:"minRequests,omitempty"`
}

// GSLBPool is gslbNames[].pool.
type GSLBPool struct {
	Members []GSLBMember `json:"members,omitempty"`
}

// GSLBMember is one pool member.
type GSLBMember struct {
	Name string `json:"name"`
	// Address is the IPv4 or IPv6 address answered (A or AAAA).
	Address string `json:"address"`
	// Region places the member, for GEO and LATENCY (a regions[] name or
	// a known Google Cloud region).
	Region string `json:"region,omitempty"`
	// Weight is the member's relative share (default 1; 0 = never chosen
	// while another member can be).
	Weight *int `json:"weight,omitempty"`
	// Priority is the FAILOVER tier: 0 is tried first.
	Priority int `json:"priority,omitempty"`
	// HealthCheck names a healthChecks[] entry that probes Address; it
	// must give a port. No health check: always healthy. It is the same
	// as HealthChecks: [{name: HealthCheck, layer: SHALLOW}].
	HealthCheck string `json:"healthCheck,omitempty"`
	// HealthChecks are layered checks (exclusive with HealthCheck):
	// SHALLOW checks decide up or down, a failing DEEP check halves the
	// member's weight, a failing SYNTHETIC check zeroes it.
	HealthChecks []GSLBMemberCheck `json:"healthChecks,omitempty"`
	// Fallback members are answered when every member is down.
	Fallback bool `json:"fallback,omitempty"`
	// Bias (-99..99, LATENCY only) scales the round-trip time from a
	// client's region to the member's: effective = rtt × (1 − bias/100),
	// as Route 53's geoproximity bias scales distance.
	Bias *int `json:"bias,omitempty"`
	// BackendService makes the member's health also follow a backend
	// service's fleet: the member is down while the engine's View gives
	// the service no healthy capacity in the member's Region (anywhere,
	// without a Region), whatever its own checks say.
	BackendService string `json:"backendService,omitempty"`
}

// GSLBMemberCheck is one of a member's layered health checks.
type GSLBMemberCheck struct {
	// Name is a healthChecks[] entry with a fixed port; it probes the
	// member's address at its own interval. Exclusive with Calculated.
	Name string `json:"name,omitempty"`
	// Layer is SHALLOW (default), DEEP or SYNTHETIC.
	Layer string `json:"layer,omitempty"`
	// Calculated is a check that passes while at least MinHealthy of its
	// child checks pass (Route 53 calculated health checks).
	Calculated *GSLBCalculated `json:"calculated,omitempty"`
}

// GSLBCalculated is members[].healthChecks[].calculated.
type GSLBCalculated struct {
	// MinHealthy is how many child checks must pass (1..len(Checks)).
	MinHealthy int `json:"minHealthy"`
	// Checks are the child checks, each with its own hysteresis.
	Checks []GSLBChildCheck `json:"checks"`
}

// GSLBChildCheck is one child of a calculated check.
type GSLBChildCheck struct {
	// Name is a healthChecks[] entry with a fixed port.
	Name string `json:"name"`
	// Address is the IP address probed (default: the member's), e.g. one
	// of the servers behind the member's address.
	Address string `json:"address,omitempty"`
}

// GSLBFailback is gslbNames[].failback.
type GSLBFailback struct {
	// RampSec is how long a recovered member takes to return to its full
	// weight (default DNSDefaultRampSec; 0 returns it at once).
	RampSec *int `json:"rampSec,omitempty"`
	// Steps are the percentages of its weight a recovered member gets,
	// evenly spaced over RampSec (default 10, 25, 50, 100; last is 100).
	Steps []int `json:"steps,omitempty"`
}

// GSLBLocation maps a client subnet, or a country or continent (as the
// name's geoDatabase gives it), to a region: exactly one of CIDR,
// Country and Continent.
type GSLBLocation struct {
	CIDR string `json:"cidr,omitempty"`
	// Country is an ISO 3166-1 alpha-2 code (a record's country.iso_code).
	Country string `json:"country,omitempty"`
	// Continent is AF, AN, AS, EU, NA, OC or SA (continent.code).
	Continent string `json:"continent,omitempty"`
	Region    string `json:"region"`
}

// Defaults of dnsZones fields.
const (
	// DNSDefaultRecordTTL is records[].ttl when unset.
	DNSDefaultRecordTTL = 300
	// DNSDefaultGSLBTTL is gslbNames[].ttl when unset.
	DNSDefaultGSLBTTL = 30
	// DNSDefaultTransitionTTL is gslbNames[].transitionTtl when unset.
	DNSDefaultTransitionTTL = 15
	// DNSDefaultAnswerCount is gslbNames[].answerCount when unset.
	DNSDefaultAnswerCount = 1
	// DNSDefaultWeight is members[].weight when unset.
	DNSDefaultWeight = 1
	// DNSDefaultRampSec is failback.rampSec when unset.
	DNSDefaultRampSec = 240
	// DNSDefaultSOARefresh, Retry, Expire and Minimum are the soa fields'
	// defaults, in seconds; DNSDefaultSOASerial is soa.serial's.
	DNSDefaultSOARefresh = 3600
	DNSDefaultSOARetry   = 600
	DNSDefaultSOAExpire  = 604800
	DNSDefaultSOAMinimum = 30
	DNSDefaultSOASerial  = 1
	// DNSDefaultHealthyThreshold and DNSDefaultUnhealthyThreshold are the
	// hysteresis of DNS pool members whose health check leaves the
	// thresholds unset: 2 successes up, 3 failures down.
	DNSDefaultHealthyThreshold   = 2
	DNSDefaultUnhealthyThreshold = 3
	// DNSMaxMembers bounds a pool's size.
	DNSMaxMembers = 256
	// DNSMaxMemberChecks bounds members[].healthChecks.
	DNSMaxMemberChecks = 8
	// DNSMaxCalculatedChecks bounds healthChecks[].calculated.checks.
	DNSMaxCalculatedChecks = 32
	// DNSDefaultDeepUnhealthyThreshold is how many consecutive failures
	// of a DEEP check (whose health check leaves unhealthyThreshold
	// unset) halve the member's weight.
	DNSDefaultDeepUnhealthyThreshold = 2
	// DNSDefaultSyntheticUnhealthyThreshold and
	// DNSDefaultSyntheticHealthyThreshold are the hysteresis of a
	// SYNTHETIC check whose health check leaves them unset: one failure
	// zeroes the member, one success restores it.
	DNSDefaultSyntheticUnhealthyThreshold = 1
	DNSDefaultSyntheticHealthyThreshold   = 1
	// DNSDefaultPassiveWindowSec, DNSDefaultPassiveMaxErrorRate,
	// DNSDefaultPassiveMaxP95LatencyMs and DNSDefaultPassiveMinRequests
	// are the passive fields' defaults: 1.5% errors or p95 above 400 ms
	// over 30 s, judged from 100 requests.
	DNSDefaultPassiveWindowSec       = 30
	DNSDefaultPassiveMaxErrorRate    = 0.015
	DNSDefaultPassiveMaxP95LatencyMs = 400
	DNSDefaultPassiveMinRequests     = 100
)

// DNS health check layers (members[].healthChecks[].layer).
const (
	DNSLayerShallow   = "SHALLOW"
	DNSLayerDeep      = "DEEP"
	DNSLayerSynthetic = "SYNTHETIC"
)

// DNSDefaultFailbackSteps returns failback.steps when unset: 10, 25, 50,
// 100 percent.
func DNSDefaultFailbackSteps() []int { return []int{10, 25, 50, 100} }

// Owner returns name (relative, absolute or "@") as an absolute,
// lower-case domain name with a trailing dot, inside zone z.
func (z *DNSZone) Owner(name string) string {
	zone := CanonicalDNSName(z.Name)
	switch {
	case name == "@" || name == "":
		return zone
	case strings.HasSuffix(name, "."):
		return strings.ToLower(name)
	case zone == ".":
		return strings.ToLower(name) + "."
	}
	return strings.ToLower(name) + "." + zone
}

// CanonicalDNSName returns name lower-cased with a trailing dot.
func CanonicalDNSName(name string) string {
	name = strings.ToLower(name)
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name
}

// InDNSZone reports whether the canonical name lies in (or is) the
// canonical zone.
func InDNSZone(name, zone string) bool {
	return zone == "." || name == zone || strings.HasSuffix(name, "."+zone)
}
