package gcpimport_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/gcpimport"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/sim"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml")

var seedZones = []string{"us-south1-a", "us-south1-b", "us-south1-c", "us-east4-a", "us-east4-b", "us-east4-c"}

func read(t testing.TB, path string) gcpimport.Source {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return gcpimport.Source{Name: filepath.Base(path), Data: data}
}

// gcloudOptions is the seed's with-policy topology as gcloud writes it:
// exports and describes, the instance-group list, every instance, and
// one list-instances output per group.
func gcloudOptions(t testing.TB) gcpimport.Options {
	dir := filepath.Join("testdata", "gcloud")
	o := gcpimport.Options{Frontend: "127.0.0.1:8080", Region: "us-south1"}
	for _, f := range []string{"url-map.yaml", "backend-services.yaml", "health-check.yaml", "service-lb-policy.yaml", "security-policy.yaml", "instance-groups.json", "instances.json"} {
		o.Files = append(o.Files, read(t, filepath.Join(dir, f)))
	}
	for _, z := range seedZones {
		o.Endpoints = append(o.Endpoints, gcpimport.Endpoints{Group: "mig-" + z, Source: read(t, filepath.Join(dir, "mig-"+z+".instances.json"))})
	}
	return o
}

// terraformOptions is the same topology over NEGs, as terraform show
// -json writes its state (NEGs and endpoints in a child module).
func terraformOptions(t testing.TB) gcpimport.Options {
	return gcpimport.Options{Frontend: "127.0.0.1:8080", Region: "us-south1",
		Files: []gcpimport.Source{read(t, filepath.Join("testdata", "terraform", "state.json"))}}
}

func mustImport(t *testing.T, o gcpimport.Options) *gcpimport.Result {
	t.Helper()
	r, err := gcpimport.Import(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The round trip: export fixtures → import → validate → simulate gives
// the with-policy rows of the seed table (internal/sim's golden, 20,000
// requests from 127.0.0.1), for gcloud's and terraform's output alike.
func TestRoundTripGivesSeedTable(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("..", "sim", "testdata", "seed-table.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, line := range strings.Split(string(golden), "\n") {
		if strings.HasPrefix(line, "with-policy ") {
			want = append(want, strings.TrimSpace(strings.TrimPrefix(line, "with-policy ")))
		}
	}
	if len(want) != 4 {
		t.Fatalf("the golden has %d with-policy rows, want 4", len(want))
	}
	scenarios := []struct {
		name string
		down []string
	}{
		{"steady", nil},
		{"us-south1-a down", []string{"us-south1-a"}},
		{"us-south1-a,b down", []string{"us-south1-a", "us-south1-b"}},
		{"all us-south1 down", []string{"us-south1-a", "us-south1-b", "us-south1-c"}},
	}
	for _, tt := range []struct {
		name string
		opts func(testing.TB) gcpimport.Options
	}{{"gcloud", gcloudOptions}, {"terraform", terraformOptions}} {
		t.Run(tt.name, func(t *testing.T) {
			res := mustImport(t, tt.opts(t))
			c, err := config.Parse(res.Config, tt.name+".yaml")
			if err != nil {
				t.Fatalf("the imported config does not validate: %v\n%s", err, res.Config)
			}
			p, err := plan.Compile(c)
			if err != nil {
				t.Fatal(err)
			}
			for i, sc := range scenarios {
				r, err := sim.Run(p, sim.Options{Requests: 20000, Seed: 1, Down: sc.down, ClientIP: "127.0.0.1"})
				if err != nil {
					t.Fatal(err)
				}
				var got strings.Builder
				fmt.Fprintf(&got, "%-20s", sc.name)
				for _, z := range seedZones {
					fmt.Fprintf(&got, " %11.1f", 100*float64(r.Zones[z])/float64(r.Requests))
				}
				fmt.Fprintf(&got, " %11.1f", 100*float64(r.Status["503"])/float64(r.Requests))
				if got.String() != want[i] {
					t.Errorf("%s:\n got %s\nwant %s", sc.name, got.String(), want[i])
				}
			}
		})
	}
}

// winticketDir holds seed 003's gcloud exports: two serverless NEGs
// (describe --format json), three backend services and the URL map.
var winticketDir = filepath.Join("..", "..", "examples", "winticket", "gcloud")

// serverlessOptions imports seed 003's exports with no mapping: the
// serverless regions get placeholder base URLs.
func serverlessOptions(t testing.TB) gcpimport.Options {
	o := gcpimport.Options{Frontend: "127.0.0.1:8082", Region: "asia-northeast2"}
	for _, f := range []string{"neg-tokyo.json", "neg-osaka.json", "backend-services.yaml", "url-map.yaml"} {
		o.Files = append(o.Files, read(t, filepath.Join(winticketDir, f)))
	}
	return o
}

// winticketOptions maps seed 003's regions to the lab's HTTPS loopback
// backends: examples/winticket/config.yaml, which spillway lab --scenario
// winticket runs, is this import's output.
func winticketOptions(t testing.TB) gcpimport.Options {
	o := serverlessOptions(t)
	o.Serverless = []config.ServerlessTarget{
		{Region: "asia-northeast1", BaseURL: "https://127.5.1.1:18443"},
		{Region: "asia-northeast2", BaseURL: "https://127.6.1.1:18443"},
	}
	return o
}

// internetOptions imports a global INTERNET_FQDN_PORT NEG (describe and
// list-network-endpoints --global), placed in us-east4.
func internetOptions(t testing.TB) gcpimport.Options {
	dir := filepath.Join("testdata", "internet")
	o := gcpimport.Options{Frontend: "127.0.0.1:8080", Region: "us-east1", InternetNEGRegion: "us-east4",
		Endpoints: []gcpimport.Endpoints{{Group: "neg-origin", Source: read(t, filepath.Join(dir, "neg-origin.endpoints.json"))}}}
	for _, f := range []string{"neg-origin.json", "backend-service.yaml", "url-map.yaml"} {
		o.Files = append(o.Files, read(t, filepath.Join(dir, f)))
	}
	return o
}

// terraformServerlessOptions imports a terraform state with serverless
// NEGs (google_compute_region_network_endpoint_group with cloud_run,
// app_engine and cloud_function blocks, in a child module), a global
// INTERNET_FQDN_PORT NEG with its google_compute_global_network_endpoint
// (placed in --region), and a Private Service Connect NEG.
func terraformServerlessOptions(t testing.TB) gcpimport.Options {
	return gcpimport.Options{Frontend: "127.0.0.1:8082", Region: "asia-northeast1",
		Serverless: []config.ServerlessTarget{
			{Region: "asia-northeast1", BaseURL: "https://127.5.1.1:18443"},
			{Region: "asia-northeast2", BaseURL: "https://127.6.1.1:18443"},
		},
		Files: []gcpimport.Source{read(t, filepath.Join("testdata", "terraform-serverless", "state.json"))}}
}

// cdnOptions imports a CDN-enabled backend service (export), one with
// Cloud CDN off, a CDN-enabled backend bucket (describe) and the URL map
// that routes /static/* to the bucket, with the NEG's endpoints.
func cdnOptions(t testing.TB) gcpimport.Options {
	dir := filepath.Join("testdata", "cdn")
	o := gcpimport.Options{Frontend: "127.0.0.1:8080", Region: "us-east1",
		Endpoints: []gcpimport.Endpoints{{Group: "neg-web-us-east1-b", Source: read(t, filepath.Join(dir, "neg-web-us-east1-b.json"))}}}
	for _, f := range []string{"url-map.yaml", "backend-service.yaml", "backend-bucket.yaml"} {
		o.Files = append(o.Files, read(t, filepath.Join(dir, f)))
	}
	return o
}

// terraformCDNOptions is the same as a terraform state, with the
// bucket's compression and edge security policy on.
func terraformCDNOptions(t testing.TB) gcpimport.Options {
	return gcpimport.Options{Frontend: "127.0.0.1:8080", Region: "us-east1",
		Files: []gcpimport.Source{read(t, filepath.Join("testdata", "terraform-cdn", "state.json"))}}
}

// The imported configs are golden files: a change in what is carried
// shows up in review. Each validates and compiles, as spillway validate
// would check it.
func TestImportGolden(t *testing.T) {
	for _, tt := range []struct {
		name, path string
		opts       func(testing.TB) gcpimport.Options
	}{
		{"gcloud", "", gcloudOptions}, {"terraform", "", terraformOptions},
		{"serverless", "", serverlessOptions}, {"internet", "", internetOptions},
		{"terraform-serverless", "", terraformServerlessOptions},
		{"cdn", "", cdnOptions}, {"terraform-cdn", "", terraformCDNOptions},
		{"winticket", filepath.Join("..", "..", "examples", "winticket", "config.yaml"), winticketOptions},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := mustImport(t, tt.opts(t))
			path := tt.path
			if path == "" {
				path = filepath.Join("testdata", tt.name+".golden.yaml")
			}
			if c, err := config.Parse(res.Config, path); err != nil {
				t.Errorf("does not validate: %v", err)
			} else if _, err := plan.Compile(c); err != nil {
				t.Errorf("does not compile: %v", err)
			}
			if *update {
				if err := os.WriteFile(path, res.Config, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/gcpimport -update to create it)", err)
			}
			if string(want) != string(res.Config) {
				t.Errorf("%s changed; got:\n%s\n(run with -update if the change is intended)", path, res.Config)
			}
		})
	}
}

// uncarriedOptions imports testdata/uncarried: a URL map, a backend
// service with every feature Spillway lacks switched on, a health check
// and its NEG's endpoints.
func uncarriedOptions(t testing.TB) gcpimport.Options {
	dir := filepath.Join("testdata", "uncarried")
	return gcpimport.Options{
		Files: []gcpimport.Source{read(t, filepath.Join(dir, "url-map.yaml")), read(t, filepath.Join(dir, "backend-service.yaml")), read(t, filepath.Join(dir, "health-check.json"))},
		Endpoints: []gcpimport.Endpoints{{Group: "neg-static-us-central1-b",
			Source: read(t, filepath.Join(dir, "neg-static-us-central1-b.json"))}},
	}
}

// What cannot be carried is reported, each with the reason; disabled
// features and output-only fields are dropped without a note.
func TestUncarriedFeaturesAreReported(t *testing.T) {
	res := mustImport(t, uncarriedOptions(t))
	want := []struct{ path, reason string }{
		{"backendServices[bs-static].compressionMode", "does not support this field"},
		{"backendServices[bs-static].iap", "Spillway has no IAP"},
		{"healthChecks[hc-static].logConfig", "writes no health check logs"},
		// Policies the input does not hold (checked once every file is read).
		{"backendServices[bs-static].securityPolicy", "Cloud Armor policy armor-owasp is not in the input"},
		{"backendServices[bs-static].edgeSecurityPolicy", "Cloud Armor policy edge-geo-block is not in the input"},
	}
	if len(res.Notes) != len(want) {
		t.Fatalf("got %d notes, want %d: %v", len(res.Notes), len(want), res.Notes)
	}
	for i, w := range want {
		n := res.Notes[i]
		if n.Path != w.path || !strings.Contains(n.Reason, w.reason) {
			t.Errorf("note %d = %v, want %s: …%s…", i, n, w.path, w.reason)
		}
	}
	if res.Dropped["id"] != 2 {
		t.Errorf("dropped %v, want id ×2", res.Dropped)
	}
	c, err := config.Parse(res.Config, "uncarried.yaml")
	if err != nil {
		t.Fatalf("does not validate: %v\n%s", err, res.Config)
	}
	bs := c.BackendServices[0]
	if bs.Iap != nil || len(c.Frontends) != 0 {
		t.Errorf("carried a feature it reported: %+v", bs)
	}
	if len(c.NetworkEndpointGroups) != 1 || c.NetworkEndpointGroups[0].Zone != "us-central1-b" || len(c.NetworkEndpointGroups[0].Endpoints) != 2 {
		t.Errorf("NEG from list-network-endpoints and the backend's link: %+v", c.NetworkEndpointGroups)
	}
	for _, s := range []string{"# Not carried:", "#   backend-service.yaml: backendServices[bs-static].iap:", "# frontends:", "urlMap: um-static"} {
		if !strings.Contains(string(res.Config), s) {
			t.Errorf("output lacks %q:\n%s", s, res.Config)
		}
	}
}

// Cloud CDN is carried from gcloud's and terraform's output alike:
// enableCDN and every cdnPolicy field on services, backend buckets with
// their policy, and the URL map's routes to buckets; a policy with Cloud
// CDN off is dropped, and what Spillway reads differently (bucketName, a
// bucket's compression or security policy, signed URL keys) is noted.
func TestCDNCarried(t *testing.T) {
	for _, tt := range []struct {
		name  string
		opts  func(testing.TB) gcpimport.Options
		notes []string // note paths, in order
	}{
		{"gcloud", cdnOptions, []string{"backendServices[bs-web].cdnPolicy.signedUrlKeyNames", "backendBuckets[bb-static].bucketName"}},
		{"terraform", terraformCDNOptions, []string{"backendBuckets[bb-static].bucketName", "backendBuckets[bb-static].compressionMode", "backendBuckets[bb-static].edgeSecurityPolicy"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := mustImport(t, tt.opts(t))
			var paths []string
			for _, n := range res.Notes {
				paths = append(paths, n.Path)
			}
			if strings.Join(paths, " ") != strings.Join(tt.notes, " ") {
				t.Errorf("notes %v, want paths %v", res.Notes, tt.notes)
			}
			if res.Dropped["cdnPolicy (Cloud CDN off)"] != 1 {
				t.Errorf("dropped %v, want the policy of bs-api (CDN off) once", res.Dropped)
			}
			c, err := config.Parse(res.Config, tt.name+".yaml")
			if err != nil {
				t.Fatalf("does not validate: %v\n%s", err, res.Config)
			}
			var web, api *config.BackendService
			for i := range c.BackendServices {
				switch c.BackendServices[i].Name {
				case "bs-web":
					web = &c.BackendServices[i]
				case "bs-api":
					api = &c.BackendServices[i]
				}
			}
			if web == nil || api == nil {
				t.Fatalf("services: %+v", c.BackendServices)
			}
			p := web.CdnPolicy
			if !web.EnableCDN || p == nil || p.CacheMode != "USE_ORIGIN_HEADERS" || p.SignedURLCacheMaxAgeSec == nil || *p.SignedURLCacheMaxAgeSec != 3600 ||
				p.ServeWhileStale == nil || *p.ServeWhileStale != 86400 || p.RequestCoalescing == nil || !*p.RequestCoalescing ||
				p.NegativeCaching == nil || !*p.NegativeCaching || len(p.NegativeCachingPolicy) == 0 || p.NegativeCachingPolicy[0].Code != 404 ||
				len(p.BypassCacheOnRequestHeaders) != 1 || p.CacheKeyPolicy == nil || len(p.CacheKeyPolicy.IncludeNamedCookies) != 1 ||
				len(p.CacheKeyPolicy.IncludeHTTPHeaders) != 1 || len(p.CacheKeyPolicy.QueryStringWhitelist) != 1 {
				t.Errorf("bs-web's Cloud CDN: enableCDN %v, %+v", web.EnableCDN, p)
			}
			if api.EnableCDN || api.CdnPolicy != nil {
				t.Errorf("bs-api (CDN off) carried a policy: %+v", api.CdnPolicy)
			}
			if len(c.BackendBuckets) != 1 {
				t.Fatalf("buckets: %+v", c.BackendBuckets)
			}
			b := c.BackendBuckets[0]
			if b.Name != "bb-static" || b.BucketName != "static-assets-prod" || !b.EnableCdn || b.CdnPolicy == nil ||
				b.CdnPolicy.CacheMode != "CACHE_ALL_STATIC" || b.CdnPolicy.DefaultTTL == nil || *b.CdnPolicy.DefaultTTL != 3600 ||
				b.EdgeSecurityPolicy != "" || (b.CompressionMode != "" && b.CompressionMode != "DISABLED") {
				t.Errorf("bucket: %+v %+v", b, b.CdnPolicy)
			}
			if !strings.Contains(string(res.Config), "service: https://www.googleapis.com/compute/v1/projects/my-gcp-project/global/backendBuckets/bb-static") {
				t.Errorf("the URL map's route to the bucket is lost:\n%s", res.Config)
			}
			if _, err := plan.Compile(c); err != nil {
				t.Errorf("does not compile: %v", err)
			}
		})
	}
}

// Each kind of input is recognised, with or without kind:, and lands in
// its collection.
func TestInputKinds(t *testing.T) {
	tests := []struct {
		name, data string
		eps        []gcpimport.Endpoints
		want       map[string]string // collection → YAML fragment of the output
	}{
		{"url map export (no kind)", "name: um\ndefaultService: bs\n", nil, map[string]string{"urlMaps": "name: um"}},
		{"url map describe", "kind: compute#urlMap\nname: um\nhostRules: [{hosts: ['*'], pathMatcher: pm}]\npathMatchers: [{name: pm, defaultService: bs}]\n", nil, map[string]string{"urlMaps": "pathMatcher: pm"}},
		{"backend service export", "name: bs\nbackends: []\nprotocol: HTTP\n", nil, map[string]string{"backendServices": "protocol: HTTP"}},
		{"health check JSON", `{"kind": "compute#healthCheck", "name": "hc", "type": "TCP", "tcpHealthCheck": {"port": 80}}`, nil, map[string]string{"healthChecks": "tcpHealthCheck"}},
		{"service LB policy describe", "name: projects/p/locations/global/serviceLbPolicies/slp\nloadBalancingAlgorithm: SPRAY_TO_REGION\n", nil, map[string]string{"serviceLbPolicies": "name: slp"}},
		{"NEG describe", "kind: compute#networkEndpointGroup\nname: neg\nzone: https://www.googleapis.com/compute/v1/projects/p/zones/us-east1-b\nnetworkEndpointType: GCE_VM_IP_PORT\ndefaultPort: 8080\nsize: 0\n", nil,
			map[string]string{"networkEndpointGroups": "zone: us-east1-b"}},
		{"NEG list-network-endpoints", "name: bs\nbackends: [{group: projects/p/zones/us-east1-b/networkEndpointGroups/neg}]\n",
			[]gcpimport.Endpoints{{Group: "neg", Source: gcpimport.Source{Name: "neg.json", Data: []byte(`[{"networkEndpoint": {"ipAddress": "10.0.0.2", "port": 80}}]`)}}},
			map[string]string{"networkEndpointGroups": "{ipAddress: 10.0.0.2, port: 80}"}},
		{"instance group list-instances and instances list", `[{"kind": "compute#instance", "name": "vm-1", "zone": "projects/p/zones/us-east1-b", "networkInterfaces": [{"networkIP": "10.0.0.7"}]}]`,
			[]gcpimport.Endpoints{{Group: "ig", Zone: "us-east1-b", Source: gcpimport.Source{Name: "ig.json", Data: []byte(`[{"instance": "https://www.googleapis.com/compute/v1/projects/p/zones/us-east1-b/instances/vm-1", "status": "RUNNING", "namedPorts": [{"name": "http", "port": 80}]}]`)}}},
			map[string]string{"instanceGroups": "{name: vm-1, ipAddress: 10.0.0.7}"}},
		{"several documents", "name: um\ndefaultService: bs\n---\nname: bs\nbackends: []\n", nil, map[string]string{"urlMaps": "name: um", "backendServices": "name: bs"}},
		{"terraform instance group", `{"format_version": "1.0", "values": {"root_module": {"resources": [
{"type": "google_compute_instance_group", "name": "ig", "values": {"name": "ig", "zone": "us-east1-b", "named_port": [{"name": "http", "port": 80}], "instances": ["projects/p/zones/us-east1-b/instances/vm-1"]}},
{"type": "google_compute_instance", "mode": "data", "name": "vm", "values": {"name": "vm-1", "zone": "us-east1-b", "network_interface": [{"network_ip": "10.0.0.9"}]}}]}}}`, nil,
			map[string]string{"instanceGroups": "namedPorts:\n  - {name: http, port: 80}\n  instances:\n  - {name: vm-1, ipAddress: 10.0.0.9}"}},
		{"terraform managed instance group and list-instances", `{"format_version": "1.0", "values": {"root_module": {"resources": [
{"type": "google_compute_instance_group_manager", "name": "mig", "values": {"name": "mig", "zone": "us-east1-b", "base_instance_name": "web", "target_size": 1, "named_port": [{"name": "http", "port": 8080}], "version": [{"instance_template": "t"}]}},
{"type": "google_compute_instance", "name": "vm", "values": {"name": "web-x1", "zone": "us-east1-b", "network_interface": [{"network_ip": "10.0.0.5"}]}}]}}}`,
			[]gcpimport.Endpoints{{Group: "mig", Source: gcpimport.Source{Name: "mig.json", Data: []byte(`[{"instance": "projects/p/zones/us-east1-b/instances/web-x1", "status": "RUNNING"}]`)}}},
			map[string]string{"instanceGroups": "namedPorts:\n  - {name: http, port: 8080}\n  instances:\n  - {name: web-x1, ipAddress: 10.0.0.5}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustImport(t, gcpimport.Options{Files: []gcpimport.Source{{Name: "in.yaml", Data: []byte(tt.data)}}, Endpoints: tt.eps})
			// A NEG described without its list is the one note expected.
			if len(res.Notes) > 0 && (tt.name != "NEG describe" || len(res.Notes) != 1 || !strings.Contains(res.Notes[0].Reason, "no endpoints")) {
				t.Errorf("notes: %v", res.Notes)
			}
			var doc map[string]any
			if err := yaml.Unmarshal(res.Config, &doc); err != nil {
				t.Fatalf("output is not YAML: %v\n%s", err, res.Config)
			}
			for coll, frag := range tt.want {
				if doc[coll] == nil || !strings.Contains(string(res.Config), frag) {
					t.Errorf("want %s with %q; got:\n%s", coll, frag, res.Config)
				}
			}
		})
	}
}

// Input that cannot be read at all is an error naming the file and the
// fix.
func TestImportErrors(t *testing.T) {
	tests := []struct {
		name, data string
		eps        []gcpimport.Endpoints
		want       string
	}{
		{"not YAML", "a: [b", nil, "in.yaml: not YAML or JSON"},
		{"empty", "", nil, "in.yaml: the file is empty"},
		{"unrecognised", "colour: blue\n", nil, "cannot tell which resource this is"},
		{"scalar", "42\n", nil, "want a resource"},
		{"member list as a file", `[{"networkEndpoint": {"ipAddress": "10.0.0.1"}}]`, nil, "pass it as --endpoints GROUP[@ZONE]=in.yaml"},
		{"terraform without values", `{"format_version": "1.0", "values": {}}`, nil, "without values.root_module"},
		{"bad member list", "name: um\ndefaultService: bs\n", []gcpimport.Endpoints{{Group: "g", Source: gcpimport.Source{Name: "g.json", Data: []byte(`[{"colour": "blue"}]`)}}}, "g.json[0]: not an entry of list-network-endpoints"},
		// Anchors and aliases (never in gcloud or terraform output) could
		// make a 98-byte file a cycle through child_modules or a
		// 487-byte one a 7 MB alias bomb (review finding 3).
		{"alias cycle", "format_version: \"1.0\"\nvalues:\n  root_module: &m\n    resources: []\n    child_modules: [*m, *m, *m]\n", nil, "anchors and aliases"},
		{"alias bomb", `kind: compute#urlMap
name: um
defaultService: bs
x0: &h {headerName: a, exactMatch: b}
x1: &m {prefixMatch: /, headerMatches: [*h,*h,*h,*h,*h,*h,*h,*h,*h,*h,*h,*h,*h,*h,*h,*h,*h,*h,*h,*h]}
x2: &r {priority: 1, service: bs, matchRules: [*m,*m,*m,*m,*m,*m,*m,*m,*m,*m,*m,*m,*m,*m,*m,*m,*m,*m,*m,*m]}
x3: &p {name: pm, defaultService: bs, routeRules: [*r,*r,*r,*r,*r,*r,*r,*r,*r,*r,*r,*r,*r,*r,*r,*r,*r,*r,*r,*r]}
pathMatchers: [*p,*p,*p,*p,*p,*p,*p,*p,*p,*p,*p,*p,*p,*p,*p,*p,*p,*p,*p,*p]
`, nil, "anchors and aliases"},
		{"group twice", "name: um\ndefaultService: bs\n", []gcpimport.Endpoints{
			{Group: "g", Zone: "us-east1-b", Source: gcpimport.Source{Name: "a.json", Data: []byte(`[]`)}},
			{Group: "g", Zone: "us-east1-b", Source: gcpimport.Source{Name: "b.json", Data: []byte(`[]`)}}}, "given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := gcpimport.Import(gcpimport.Options{Files: []gcpimport.Source{{Name: "in.yaml", Data: []byte(tt.data)}}, Endpoints: tt.eps})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// Instances without an address and groups without members are reported,
// not invented.
func TestMissingMembersReported(t *testing.T) {
	res := mustImport(t, gcpimport.Options{
		Files:     []gcpimport.Source{{Name: "bs.yaml", Data: []byte("name: bs\nportName: http\nport: 80\nbackends:\n- {group: projects/p/zones/us-east1-b/instanceGroups/ig}\n- {group: projects/p/zones/us-east1-c/networkEndpointGroups/neg}\n")}},
		Endpoints: []gcpimport.Endpoints{{Group: "ig", Source: gcpimport.Source{Name: "ig.json", Data: []byte(`[{"instance": "projects/p/zones/us-east1-b/instances/vm-9", "status": "RUNNING"}]`)}}},
	})
	var got []string
	for _, n := range res.Notes {
		got = append(got, n.Path)
	}
	want := "instanceGroups[ig].namedPorts instanceGroups[ig].instances[vm-9] networkEndpointGroups[neg].endpoints"
	if strings.Join(got, " ") != want {
		t.Errorf("notes on %v, want %s", got, want)
	}
}

// TestLogConfigCarried: a backend service's logConfig decides what the
// access log keeps (enable, sampleRate), so import carries it as it is;
// dropped, an imported 50% service logged 100% and a disabled one was
// logged at the default rate. A health check's logConfig is still only
// reported (Spillway writes no health check logs).
func TestLogConfigCarried(t *testing.T) {
	res := mustImport(t, uncarriedOptions(t))
	c, err := config.Parse(res.Config, "imported.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Config)
	}
	lc := c.BackendServices[0].LogConfig
	if lc == nil || !lc.Enable || lc.SampleRate == nil || *lc.SampleRate != 0.5 {
		t.Fatalf("backend service logConfig = %+v, want enable: true, sampleRate: 0.5\n%s", lc, res.Config)
	}
}

// Serverless NEGs need no member lists and keep their region; where they
// run is a reported placeholder unless --serverless gives it; a URL mask
// is reported; a global internet NEG known only from a backend's link and
// its list becomes INTERNET_FQDN_PORT, and without a region says which
// flag to pass.
func TestServerlessAndInternetNotes(t *testing.T) {
	var paths []string
	for _, n := range mustImport(t, serverlessOptions(t)).Notes {
		paths = append(paths, n.Path)
	}
	if want := "spillway.serverless[asia-northeast1].baseUrl spillway.serverless[asia-northeast2].baseUrl"; strings.Join(paths, " ") != want {
		t.Errorf("notes on %v, want %s", paths, want)
	}
	if n := mustImport(t, winticketOptions(t)).Notes; len(n) != 0 {
		t.Errorf("with --serverless for both regions: notes %v", n)
	}
	tests := []struct {
		name, data string
		eps        []gcpimport.Endpoints
		path, want string
	}{
		{"url mask only", `{"kind": "compute#networkEndpointGroup", "name": "neg", "networkEndpointType": "SERVERLESS", "region": "regions/us-central1", "cloudRun": {"urlMask": "<service>.example.com"}}`, nil,
			"networkEndpointGroups[neg].cloudRun.urlMask", `URL mask "<service>.example.com" is not applied: Spillway sends every request to the fixed service (docs/extensions.md), and this group names none`},
		{"internet NEG without a region", "name: bs\nbackends: [{group: projects/p/global/networkEndpointGroups/neg-ext}]\n",
			[]gcpimport.Endpoints{{Group: "neg-ext", Source: gcpimport.Source{Name: "ext.json", Data: []byte(`[{"networkEndpoint": {"fqdn": "origin.example.com", "port": 443}}]`)}}},
			"networkEndpointGroups[neg-ext].region", "pass --internet-neg-region REGION"},
		{"serverless NEG without its describe", "name: bs\nbackends: [{group: projects/p/regions/us-central1/networkEndpointGroups/neg-run}]\n", nil,
			"networkEndpointGroups[neg-run]", "give `gcloud compute network-endpoint-groups describe neg-run --region us-central1 --format json`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustImport(t, gcpimport.Options{Files: []gcpimport.Source{{Name: "in.yaml", Data: []byte(tt.data)}}, Endpoints: tt.eps})
			for _, n := range res.Notes {
				if n.Path == tt.path && strings.Contains(n.Reason, tt.want) {
					return
				}
			}
			t.Errorf("no note on %s containing %q: %v\n%s", tt.path, tt.want, res.Notes, res.Config)
		})
	}
	// Given a region, the same internet NEG validates.
	res := mustImport(t, gcpimport.Options{InternetNEGRegion: "us-east4", Files: []gcpimport.Source{{Name: "in.yaml", Data: []byte(tests[1].data + "---\nname: um\ndefaultService: bs\n")}}, Endpoints: tests[1].eps})
	if _, err := config.Parse(res.Config, "internet.yaml"); err != nil {
		t.Errorf("%v\n%s", err, res.Config)
	}
}

// Terraform's serverless and internet NEGs are carried as the gcloud
// path carries them: the only notes are on what Spillway cannot apply
// (a URL mask) or serve (a Private Service Connect NEG).
func TestTerraformServerlessAndInternetNotes(t *testing.T) {
	res := mustImport(t, terraformServerlessOptions(t))
	want := map[string]string{
		"networkEndpointGroups[neg-fn-osaka].cloudFunction.urlMask":          `URL mask "/api/<function>" is not applied`,
		"module.serverless.google_compute_region_network_endpoint_group.psc": "of type PRIVATE_SERVICE_CONNECT",
	}
	for _, n := range res.Notes {
		if w, ok := want[n.Path]; ok && strings.Contains(n.Reason, w) {
			delete(want, n.Path)
			continue
		}
		t.Errorf("unexpected note on %s: %s", n.Path, n.Reason)
	}
	for path, w := range want {
		t.Errorf("no note on %s containing %q", path, w)
	}
	c, err := config.Parse(res.Config, "terraform-serverless.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, g := range c.NetworkEndpointGroups {
		got[g.Name] = g.NetworkEndpointType + " " + g.Region
	}
	for name, w := range map[string]string{
		"neg-run-tokyo": "SERVERLESS asia-northeast1", "neg-run-osaka": "SERVERLESS asia-northeast2",
		"neg-fn-osaka": "SERVERLESS asia-northeast2", "neg-app-tokyo": "SERVERLESS asia-northeast1",
		"neg-origin": "INTERNET_FQDN_PORT asia-northeast1",
	} {
		if got[name] != w {
			t.Errorf("group %s: %q, want %q (all: %v)", name, got[name], w, got)
		}
	}
}
