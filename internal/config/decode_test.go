package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// smallYAML and smallJSON are the same configuration; the JSON writes
// int64 fields as strings, the way Google's REST API exports them.
const smallYAML = `
healthChecks:
- name: hc
  type: TCP
  tcpHealthCheck: {port: 9000}
networkEndpointGroups:
- name: neg-a
  zone: us-east1-b
  endpoints: [{ipAddress: 10.0.0.1, port: 80}]
backendServices:
- name: bs
  timeoutSec: 30
  healthChecks: [hc]
  consistentHash: {minimumRingSize: 2048}
  outlierDetection: {interval: {seconds: 10, nanos: 5}}
  backends: [{group: neg-a, balancingMode: RATE, maxRatePerEndpoint: 2.5, capacityScaler: 0.5}]
urlMaps:
- name: um
  defaultService: bs
serviceLbPolicies:
- name: p
  labels: {team: edge}
  autoCapacityDrain: {enable: true}
regions:
- name: us-east1
  rttMs: {us-east1: 0.5}
`

const smallJSON = `{
  "healthChecks": [{"name": "hc", "type": "TCP", "tcpHealthCheck": {"port": 9000}}],
  "networkEndpointGroups": [
    {"name": "neg-a", "zone": "us-east1-b", "endpoints": [{"ipAddress": "10.0.0.1", "port": 80}]}
  ],
  "backendServices": [{
    "name": "bs",
    "timeoutSec": "30",
    "healthChecks": ["hc"],
    "consistentHash": {"minimumRingSize": "2048"},
    "outlierDetection": {"interval": {"seconds": "10", "nanos": 5}},
    "backends": [{"group": "neg-a", "balancingMode": "RATE", "maxRatePerEndpoint": 2.5, "capacityScaler": 0.5}]
  }],
  "urlMaps": [{"name": "um", "defaultService": "bs"}],
  "serviceLbPolicies": [{"name": "p", "labels": {"team": "edge"}, "autoCapacityDrain": {"enable": true}}],
  "regions": [{"name": "us-east1", "rttMs": {"us-east1": 0.5}}]
}`

func mustParse(t *testing.T, data, file string) *Config {
	t.Helper()
	cfg, err := Parse([]byte(data), file)
	if err != nil {
		t.Fatalf("Parse(%s): %v", file, err)
	}
	return cfg
}

func TestYAMLAndJSONDecodeIdentically(t *testing.T) {
	fromYAML := mustParse(t, smallYAML, "c.yaml")
	fromJSON := mustParse(t, smallJSON, "c.json")
	if fromYAML.File != "c.yaml" || fromJSON.File != "c.json" {
		t.Errorf("File = %q, %q; want the names passed to Parse", fromYAML.File, fromJSON.File)
	}
	fromJSON.File = fromYAML.File
	if !reflect.DeepEqual(fromYAML, fromJSON) {
		a, _ := json.Marshal(fromYAML)
		b, _ := json.Marshal(fromJSON)
		t.Errorf("YAML and JSON decode differently:\nyaml: %s\njson: %s", a, b)
	}
	bs := fromYAML.BackendServices[0]
	if *bs.TimeoutSec != 30 || *bs.ConsistentHash.MinimumRingSize != 2048 || bs.OutlierDetection.Interval.Seconds != 10 ||
		*bs.Backends[0].CapacityScaler != 0.5 || fromYAML.Regions[0].RTTMs["us-east1"] != 0.5 ||
		!fromYAML.ServiceLbPolicies[0].AutoCapacityDrain.Enable {
		t.Errorf("decoded values are wrong: %+v", bs)
	}
}

// TestJSONRoundTrip re-encodes the full example as (tab-indented) JSON
// with encoding/json and checks that it decodes to the same Config.
func TestJSONRoundTrip(t *testing.T) {
	want, err := Load(filepath.Join("testdata", "valid", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(want, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(data, want.File)
	if err != nil {
		t.Fatalf("Parse(JSON of full.yaml): %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("JSON round trip differs:\n got: %+v\nwant: %+v", got, want)
	}
}

func TestValidConfigs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "valid", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no valid configs: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("Validate after Load: %v", err)
			}
		})
	}
}

func TestIntegersAsStrings(t *testing.T) {
	tests := []struct {
		name, yaml string
		get        func(*Config) int64
		want       int64
	}{
		{"quoted int", `{spillway: {undrainHoldSec: "120"}}`, func(c *Config) int64 { return int64(*c.Spillway.UndrainHoldSec) }, 120},
		{"quoted int64", `{backendServices: [{name: b, consistentHash: {minimumRingSize: "1024"}}]}`,
			func(c *Config) int64 { return *c.BackendServices[0].ConsistentHash.MinimumRingSize }, 1024},
		{"quoted duration seconds", `{backendServices: [{name: b, outlierDetection: {interval: {seconds: "30"}}}]}`,
			func(c *Config) int64 { return c.BackendServices[0].OutlierDetection.Interval.Seconds }, 30},
		{"quoted int32", `{backendServices: [{name: b, outlierDetection: {interval: {nanos: "5"}}}]}`,
			func(c *Config) int64 { return int64(c.BackendServices[0].OutlierDetection.Interval.Nanos) }, 5},
		{"whole float", `{spillway: {undrainHoldSec: 30.0}}`, func(c *Config) int64 { return int64(*c.Spillway.UndrainHoldSec) }, 30},
		{"hex", `{spillway: {undrainHoldSec: 0x10}}`, func(c *Config) int64 { return int64(*c.Spillway.UndrainHoldSec) }, 16},
		{"quoted float for a number", `{regions: [{name: r, latitude: "1.5", longitude: 2}]}`,
			func(c *Config) int64 { return int64(*c.Regions[0].Latitude * 10) }, 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, tt.yaml, "test.yaml")
			if got := tt.get(cfg); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

// TestDecodeErrors covers the strict decoder: unknown fields, wrong types,
// duplicate keys and malformed YAML, each with file and line.
func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown field with suggestion",
			"urlMaps:\n- name: um\n  defaultRouteAction:\n    weightedBackendServices:\n    - {backendService: a, weight: 1}\n    - {backendService: b, weigth: 1}\n",
			`test.yaml:6:27: urlMaps[um].defaultRouteAction.weightedBackendServices[b]: unknown field "weigth" (fix: did you mean "weight"?)`},
		{"snake case field",
			"backendServices:\n- name: b\n  timeout_sec: 5\n",
			`test.yaml:3:3: backendServices[b]: unknown field "timeout_sec" (fix: did you mean "timeoutSec"?)`},
		{"wrong case field",
			"healthChecks:\n- Name: hc\n",
			`test.yaml:2:3: healthChecks[0]: unknown field "Name" (fix: did you mean "name"?)`},
		{"unknown top-level field",
			"backendService: []\n",
			`test.yaml:1:1: unknown field "backendService" (fix: did you mean "backendServices"?)`},
		{"unknown field without suggestion",
			"spillway: {colour: blue}\n",
			`test.yaml:1:12: spillway: unknown field "colour" (fix: remove it; fields here are: undrainHoldSec, demandWindowSec, undrainRampSec, secondLayerProxies, fidelityProfile, http1Server, http2Server, parkIdleConnections, normalizePath, mergeSlashes, pathWithEscapedSlashesAction, accessLog, requestMetrics, geoDatabase, dnsIdentity, dnsResponseRateLimit, dnsMaxDenialSignaturesPerSecond, dnsQueryLog, dnstap, acme, tracing, serverless, cdn, signedUrlKeys, buckets, resolver, bgp)`},
		{"unsupported Google Cloud field",
			"backendServices:\n- name: b\n  corsPolicy: {}\n",
			`test.yaml:3:3: backendServices[b]: field "corsPolicy" is a Google Cloud field that Spillway does not support yet (fix: remove it)`},
		{"number given text",
			"regions:\n- name: r\n  latitude: abc\n",
			`test.yaml:3:13: regions[r].latitude: want a number, got "abc" (fix: write a number such as 0.5)`},
		{"integer given a fraction",
			"spillway:\n  undrainHoldSec: 1.5\n",
			`test.yaml:2:19: spillway.undrainHoldSec: want an integer, got 1.5 (fix: write a whole number such as 30)`},
		{"integer given a fraction as text",
			"spillway:\n  undrainHoldSec: \"1.5\"\n",
			`test.yaml:2:19: spillway.undrainHoldSec: want an integer, got "1.5" (fix: write a whole number such as 30)`},
		{"int32 overflow",
			"backendServices:\n- name: b\n  outlierDetection: {interval: {nanos: 3000000000}}\n",
			`test.yaml:3:40: backendServices[b].outlierDetection.interval.nanos: 3000000000 does not fit in a 32-bit integer (fix: use a smaller number)`},
		{"bool given text",
			"serviceLbPolicies:\n- name: p\n  autoCapacityDrain: {enable: \"yes\"}\n",
			`test.yaml:3:31: serviceLbPolicies[p].autoCapacityDrain.enable: want true or false, got "yes" (fix: write true or false, without quotes)`},
		{"list given a scalar",
			"backendServices:\n- name: b\n  healthChecks: hc\n",
			"test.yaml:3:17: backendServices[b].healthChecks: want a list, got \"hc\" (fix: write each item on its own line starting with `- `, or as [a, b])"},
		{"struct given a list",
			"spillway: [1, 2]\n",
			"test.yaml:1:11: spillway: want a mapping of fields, got a list (fix: write the fields indented under the key, one `name: value` per line)"},
		{"string given a mapping",
			"urlMaps:\n- name: {a: b}\n",
			`test.yaml:2:9: urlMaps[0].name: want a string, got a mapping (fix: write a single value, quoted if it contains special characters)`},
		{"map value of the wrong type",
			"regions:\n- name: r\n  rttMs: {a: fast}\n",
			`test.yaml:3:14: regions[r].rttMs.a: want a number, got "fast" (fix: write a number such as 0.5)`},
		{"infinite number",
			"regions:\n- name: r\n  latitude: .inf\n",
			`test.yaml:3:13: regions[r].latitude: want a number, got .inf (fix: write a number such as 0.5)`},
		{"duplicate key",
			"regions:\n- name: r\n  name: s\n",
			`test.yaml:3:3: regions[r].name: duplicate key (first set on line 2) (fix: keep only one "name")`},
		{"duplicate map key",
			"serviceLbPolicies:\n- name: p\n  labels:\n    a: x\n    a: y\n",
			`test.yaml:5:5: serviceLbPolicies[p].labels.a: duplicate key (first set on line 4) (fix: keep only one "a")`},
		{"syntax error",
			"regions:\n- name: [r\n",
			`test.yaml:2:10: invalid YAML: did not find expected ',' or ']' (fix: check indentation, quoting and brackets near this line)`},
		{"two documents",
			"regions: []\n---\nregions: []\n",
			`test.yaml:2:1: the file holds more than one YAML document (a second one starts here) (fix: keep one configuration per file, or merge the documents)`},
		{"bad indentation",
			"regions:\n- name: a\n  latitude: 1\n longitude: 2\n",
			`test.yaml:4:2: invalid YAML: did not find expected key (fix: indent this line as its siblings are: the keys of one mapping, and the items of one list, start in the same column)`},
		{"tab indentation",
			"regions:\n\t- name: a\n",
			`test.yaml:2:1: invalid YAML: found character that cannot start any token (fix: check indentation, quoting and brackets near this line)`},
		{"merge cycle",
			"regions: [&a {name: r, <<: *a}]\n",
			`test.yaml:1:11: regions[r]: merge key refers back to the mapping that contains it (fix: do not merge a mapping into itself)`},
		{"top-level list",
			"- a\n- b\n",
			"test.yaml:1:1: want a mapping of fields, got a list (fix: write the fields indented under the key, one `name: value` per line)"},
		{"several errors, in file order",
			"spillway: {undrainHoldSec: x}\nregions:\n- name: r\n  latitude: y\n  lat: 1\n",
			"test.yaml:1:28: spillway.undrainHoldSec: want an integer, got \"x\" (fix: write a whole number such as 30)\n" +
				"test.yaml:4:13: regions[r].latitude: want a number, got \"y\" (fix: write a number such as 0.5)\n" +
				`test.yaml:5:3: regions[r]: unknown field "lat" (fix: remove it; fields here are: name, latitude, longitude, rttMs, regionalLayer)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml), "test.yaml")
			if err == nil {
				t.Fatalf("Parse succeeded, want error:\n%s", tt.want)
			}
			if cfg != nil {
				t.Errorf("Parse returned a config with an error")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Parse error:\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	tests := []struct {
		name, yaml string
		check      func(*Config) bool
	}{
		{"empty file", "", func(c *Config) bool { return reflect.DeepEqual(c, &Config{File: "test.yaml"}) }},
		{"comments only", "# nothing yet\n", func(c *Config) bool { return c.Regions == nil }},
		{"nulls leave fields unset", "spillway: {undrainHoldSec: null, demandWindowSec: ~}\nregions: null\n",
			func(c *Config) bool {
				return c.Spillway.UndrainHoldSec == nil && c.Spillway.DemandWindowSec == nil && c.Regions == nil
			}},
		{"anchors, aliases and merge keys", `
x-region: &r {latitude: 1, longitude: 2}
regions:
- <<: *r
  name: a
- <<: *r
  name: b
  latitude: 3
`, func(c *Config) bool {
			return *c.Regions[0].Latitude == 1 && *c.Regions[1].Latitude == 3 && *c.Regions[1].Longitude == 2
		}},
		{"numbers as text", `{urlMaps: [{name: m, defaultService: bs, description: 42}], backendServices: [{name: bs}]}`,
			func(c *Config) bool { return c.URLMaps[0].Description == "42" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if cfg := mustParse(t, tt.yaml, "test.yaml"); !tt.check(cfg) {
				t.Errorf("decoded config is wrong: %+v", cfg)
			}
		})
	}
}

func TestErrorCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("regions:\n")
	for i := range 50 {
		fmt.Fprintf(&b, "- {name: r%d, latitude: x%d}\n", i, i)
	}
	_, err := Parse([]byte(b.String()), "test.yaml")
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error is %T, want Errors", err)
	}
	if len(errs) != maxErrors {
		t.Errorf("got %d errors, want the cap of %d", len(errs), maxErrors)
	}
}

func TestAliasBomb(t *testing.T) {
	// Five levels of 20 aliases each: 20^5 header matches from about 2 kB.
	level := func(anchor, item string) string {
		return anchor + " [" + strings.TrimSuffix(strings.Repeat(item+", ", 20), ", ") + "]\n"
	}
	doc := level("x-a: &a", "{headerName: h, presentMatch: true}") +
		level("x-b: &b", "{headerMatches: *a}") +
		level("x-c: &c", "{matchRules: *b, service: s}") +
		level("x-d: &d", "{name: p, routeRules: *c}") +
		level("urlMaps:", "{name: m, pathMatchers: *d}")
	_, err := Parse([]byte(doc), "bomb.yaml")
	if err == nil || !strings.Contains(err.Error(), "expands to too many values") {
		t.Fatalf("Parse = %.300v, want the expansion limit", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "spillway.yaml")
	if err := os.WriteFile(path, []byte(smallYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil || cfg.File != path {
		t.Fatalf("Load = %v, %v; want a config from %s", cfg, err, path)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want fs.ErrNotExist", err)
	}
	if err := os.WriteFile(path, []byte("regions: [{name: r, latitude: 100, longitude: 0}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.File != path || fe.Line != 1 || fe.Column != 21 || fe.Path != "regions[r].latitude" {
		t.Errorf("Load(invalid) = %v, want a FieldError at %s:1:21 regions[r].latitude", err, path)
	}
}
