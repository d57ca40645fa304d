//go:build linux

package globallab

import (
	"bytes"
	"fmt"
	"text/template"
)

// Lab settings written into the generated configs.
const (
	// probeIntervalMs is every health check's interval and timeout
	// (Google's minimum is 1 s; the lab wants failures seen within a
	// second). The timeout must cover a probe across the longest link:
	// Frankfurt-Tokyo is 200 ms a round trip, twice for the handshake
	// and the request.
	probeIntervalMs = 500
	// ratePerEndpoint is each backend's RATE capacity: with 2 zones × 2
	// endpoints a region takes 4 × 25 = 100 rps, seed 001's 3,000 rps
	// scaled by 1/30.
	ratePerEndpoint = 25
	// edgeHoldTime is the BGP hold time of the edge sessions (seconds,
	// the least BGP allows): how long a router keeps a dead edge's
	// routes.
	edgeHoldTime = 3
	// holdDownSec is the edges' announce hysteresis and drainSec their
	// lame duck, both short for the lab.
	holdDownSec = 2
	drainSec    = 1
	// withdrawFloor is minHealthyCapacityPercent in the withdraw variant
	// of the Tokyo edge (row c3): with its own region's backends down it
	// has 2/3 of its capacity, below the floor.
	withdrawFloor = 80
	// degradedBelow and degradedPrepend are the Ashburn edge's
	// controlled anycast in rows e1-e2: below 80% of its capacity
	// healthy (Tokyo's backends down: 67%) it announces with its AS
	// three more times in the path.
	degradedBelow   = 80
	degradedPrepend = 3
	// dnsTTL is the GSLB answer TTL.
	dnsTTL = 5
	// GSLBName is the name the GSLB answers.
	GSLBName = "www.lab.example."
)

// zones lists a site's zones with their backend addresses.
func (s *Site) zones() [][]string {
	out := make([][]string, zonesPerSite)
	for i := range zonesPerSite * instancesPerZone {
		out[i/instancesPerZone] = append(out[i/instancesPerZone], s.BackendAddr(i))
	}
	return out
}

// common is the part of the edge and regional configs that describes
// the backends: one backend service over every zone of the sites given.
const common = `healthChecks:
- {name: hc-web, type: HTTP, checkIntervalMs: ` + "{{.Interval}}" + `, timeoutMs: ` + "{{.Interval}}" + `, healthyThreshold: 1, unhealthyThreshold: 2,
   httpHealthCheck: {port: ` + "{{.Port}}" + `, requestPath: /healthz}}
networkEndpointGroups:
{{- range $s := .Sites}}{{range $z, $addrs := $s.Zones}}
- name: neg-{{$s.Zone $z}}
  zone: {{$s.Zone $z}}
  defaultPort: {{$.Port}}
  endpoints: [{{range $i, $a := $addrs}}{{if $i}}, {{end}}{ipAddress: {{$a}}}{{end}}]
{{- end}}{{end}}
backendServices:
- name: web
  healthChecks: [hc-web]
  loadBalancingScheme: EXTERNAL_MANAGED
{{- if .Edge}}
  customResponseHeaders: ["X-Lab-Edge: {{.Site.Key}}"]
{{- end}}
  backends:
{{- range $s := .Sites}}{{range $z, $addrs := $s.Zones}}
  - {group: neg-{{$s.Zone $z}}, balancingMode: RATE, maxRatePerEndpoint: {{$.Rate}}}
{{- end}}{{end}}
urlMaps:
- {name: web, defaultService: web}
`

// backendsTmpl is every site's backends and nothing else: the plan the
// lab starts the backends from and simulates the waterfall on (the
// edge's decision, one layer).
var backendsTmpl = template.Must(template.New("backends").Parse(`# every zone of the lab
regions:
{{- range .Sites}}
- name: {{.Region}}
{{- end}}
` + common))

// edgeTmpl is a site's edge: the anycast frontend (announced over BGP
// to the site's router), the same on the edge's unicast address (the
// GSLB's answers and the lab's direct path), both again over IPv6 (the
// IPv6 prefix announced over the IPv6 session), all forwarding to the
// region's regional layer; and a one-layer frontend on port 8080 that
// proxies to the endpoints itself (the cost row's baseline).
var edgeTmpl = template.Must(template.New("edge").Parse(`# {{.Site.City}} edge, written by spillway lab --global
spillway:
  undrainHoldSec: 2
  bgp:
    localAsn: {{.EdgeASN}}
    routerId: {{.Site.EdgeUnicast}}
    listenPort: -1
    neighbors:
    - {address: {{.Site.RouterLAN}}, peerAsn: {{.Site.ASN}}, port: 179, holdTimeSec: {{.Hold}}}
    - {address: "{{.Site.RouterLAN6}}", peerAsn: {{.Site.ASN}}, port: 179, holdTimeSec: {{.Hold}}}
    holdDownSec: {{.HoldDown}}
    drainSec: {{.Drain}}
{{- if .Floor}}
    minHealthyCapacityPercent: {{.Floor}}
{{- end}}
{{- if .Degraded}}
    degraded: {belowHealthyCapacityPercent: {{.Degraded}}, asPathPrepend: {{.Prepend}}}
{{- end}}
regions:
{{- range .Sites}}
- name: {{.Region}}
  regionalLayer: {endpoints: ["{{.RegionalAddr}}:{{$.RegionalPort}}"], protocol: H2C, maxConnections: 4}
{{- end}}
` + common + `frontends:
- {name: edge, address: "{{.Anycast}}:{{.EdgePort}}", protocol: HTTP, urlMap: web, region: {{.Site.Region}}, layer: EDGE, anycastPrefixes: ["{{.Prefix}}"]}
- {name: edge-unicast, address: "{{.Site.EdgeUnicast}}:{{.EdgePort}}", protocol: HTTP, urlMap: web, region: {{.Site.Region}}, layer: EDGE}
- {name: edge6, address: "[{{.Anycast6}}]:{{.EdgePort}}", protocol: HTTP, urlMap: web, region: {{.Site.Region}}, layer: EDGE, anycastPrefixes: ["{{.Prefix6}}"]}
- {name: edge-unicast6, address: "[{{.Site.EdgeUnicast6}}]:{{.EdgePort}}", protocol: HTTP, urlMap: web, region: {{.Site.Region}}, layer: EDGE}
- {name: one-layer, address: "{{.Site.EdgeUnicast}}:8080", protocol: HTTP, urlMap: web, region: {{.Site.Region}}}
`))

// regionalTmpl is a site's regional layer: its own region's zones.
var regionalTmpl = template.Must(template.New("regional").Parse(`# {{.Site.City}} regional layer, written by spillway lab --global
spillway:
  undrainHoldSec: 2
regions:
- name: {{.Site.Region}}
` + common + `frontends:
- {name: regional, address: "0.0.0.0:{{.RegionalPort}}", protocol: HTTP, urlMap: web, region: {{.Site.Region}}, layer: REGIONAL, trustedEdges: ["198.51.100.0/24"]}
`))

// dnsTmpl is the GSLB: www answered by GEO from the client's subnet (ECS
// or resolver address) with the edges' unicast addresses, each checked
// through its edge (GET /healthz on port 80, answered by a backend).
var dnsTmpl = template.Must(template.New("dns").Parse(`# The GSLB (the brain), written by spillway lab --global
healthChecks:
- {name: hc-edge, type: HTTP, checkIntervalMs: {{.Interval}}, timeoutMs: {{.Interval}}, healthyThreshold: 1, unhealthyThreshold: 2,
   httpHealthCheck: {port: {{.EdgePort}}, requestPath: /healthz}}
regions:
{{- range .Sites}}
- name: {{.Region}}
{{- end}}
frontends:
- {name: dns, address: "{{.DNS}}:53", protocol: DNS}
dnsZones:
- name: lab.example.
  nameServers: [ns1.lab.example.]
  records:
  - {name: ns1, type: A, ttl: 3600, rrdatas: ["{{.DNS}}"]}
  gslbNames:
  - name: www
    policy: GEO
    ttl: {{.TTL}}
    transitionTtl: {{.TTL}}
    failback: {rampSec: 0}
    passive: {enable: false}
    pool:
      members:
{{- range .Sites}}
      - {name: {{.Key}}, address: {{.EdgeUnicast}}, region: {{.Region}}, healthCheck: hc-edge}
{{- end}}
    locations:
{{- range .Sites}}
    - {cidr: {{.ClientNet}}, region: {{.Region}}}
{{- end}}
    - {cidr: {{.BerlinNet}}, region: europe-west10}
`))

// BerlinNet is the Berlin client's subnet, sent as ECS: inside the lab's
// European block, mapped to europe-west10 (Berlin), where no site runs,
// so GEO answers the nearest member region by RTT.
const BerlinNet = "192.0.2.112/28"

// variant is what an edge's config adds to the template's: the
// withdraw floor (minHealthyCapacityPercent) and the degraded threshold
// (degraded.belowHealthyCapacityPercent), 0 for none.
type variant struct{ floor, degraded int }

// render executes one of the templates for site s (nil for the GSLB).
func render(t *template.Template, sites []*Site, s *Site, role string, v variant) ([]byte, error) {
	type zoned struct {
		*Site
		Zones [][]string
	}
	var zs []zoned
	for _, x := range sites {
		if t == regionalTmpl && x != s {
			continue
		}
		zs = append(zs, zoned{x, x.zones()})
	}
	data := map[string]any{
		"Site": s, "Sites": zs, "Edge": role == "Edge", "Anycast": AnycastAddr, "Prefix": AnycastPrefix,
		"Anycast6": AnycastAddr6, "Prefix6": AnycastPrefix6,
		"EdgeASN": edgeASN, "Hold": edgeHoldTime, "HoldDown": holdDownSec, "Drain": drainSec, "Floor": v.floor,
		"Degraded": v.degraded, "Prepend": degradedPrepend,
		"EdgePort": edgePort, "RegionalPort": regionalPort, "Port": backendPort, "Rate": ratePerEndpoint,
		"Interval": probeIntervalMs, "TTL": dnsTTL, "BerlinNet": BerlinNet, "DNS": sites[1].DNSAddr(),
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("globallab: %s config: %w", t.Name(), err)
	}
	return b.Bytes(), nil
}
