package route

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

func ptr[T any](v T) *T { return &v }

const bs = "projects/p/global/backendServices/"

// canaryMatcher is seed 001's url-map.yaml excerpt.
func canaryMatcher() config.PathMatcher {
	return config.PathMatcher{
		Name:           "web",
		DefaultService: bs + "web-v1",
		RouteRules: []config.HTTPRouteRule{
			{
				Priority: 1,
				MatchRules: []config.HTTPRouteRuleMatch{{
					PrefixMatch:   "/",
					HeaderMatches: []config.HTTPHeaderMatch{{HeaderName: "x-canary", ExactMatch: ptr("always")}},
				}},
				Service: bs + "web-v2",
			},
			{
				Priority:   2,
				MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/"}},
				RouteAction: &config.HTTPRouteAction{
					WeightedBackendServices: []config.WeightedBackendService{
						{BackendService: bs + "web-v1", Weight: 950},
						{BackendService: bs + "web-v2", Weight: 50},
					},
					RetryPolicy: &config.RetryPolicy{RetryConditions: []string{"connect-failure", "gateway-error"}, NumRetries: ptr(2), PerTryTimeout: &config.Duration{Seconds: 5}},
					Timeout:     &config.Duration{Seconds: 20},
				},
			},
		},
	}
}

func goldenURLMap() *config.URLMap {
	return &config.URLMap{
		Name:           "um",
		DefaultService: bs + "svc-default",
		HeaderAction:   &config.HTTPHeaderAction{RequestHeadersToAdd: []config.HTTPHeaderOption{{HeaderName: "x-level", HeaderValue: "urlmap"}}},
		HostRules: []config.HostRule{
			{Hosts: []string{"www.example.com"}, PathMatcher: "web"},
			{Hosts: []string{"api.example.com"}, PathMatcher: "api"},
			{Hosts: []string{"static.example.com", "ports.example.net"}, PathMatcher: "static"},
			{Hosts: []string{"ports.example.net:8080"}, PathMatcher: "port8080"},
			{Hosts: []string{"*.example.com"}, PathMatcher: "wild"},
			{Hosts: []string{"*.eu.example.com"}, PathMatcher: "wildeu"},
			{Hosts: []string{"*-canary.example.org"}, PathMatcher: "dash"},
			{Hosts: []string{"redirect.example.com"}, PathMatcher: "redir"},
		},
		PathMatchers: []config.PathMatcher{
			canaryMatcher(),
			{
				Name:           "api",
				DefaultService: bs + "svc-api",
				HeaderAction:   &config.HTTPHeaderAction{RequestHeadersToAdd: []config.HTTPHeaderOption{{HeaderName: "x-level", HeaderValue: "pm"}}},
				RouteRules: []config.HTTPRouteRule{
					// Deliberately out of order: priority sorts.
					{Priority: 20, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/v1/", HeaderMatches: []config.HTTPHeaderMatch{{HeaderName: "X-Version", PrefixMatch: ptr("beta")}}}}, Service: "svc-beta"},
					{Priority: 10, MatchRules: []config.HTTPRouteRuleMatch{{FullPathMatch: "/healthz"}}, Service: "svc-health",
						HeaderAction: &config.HTTPHeaderAction{RequestHeadersToAdd: []config.HTTPHeaderOption{{HeaderName: "x-level", HeaderValue: "rule"}}}},
					{Priority: 30, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/V2/", IgnoreCase: true}}, Service: "svc-v2",
						RouteAction: &config.HTTPRouteAction{URLRewrite: &config.URLRewrite{HostRewrite: "v2.internal", PathPrefixRewrite: "/"}}},
					{Priority: 40, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/users", QueryParameterMatches: []config.HTTPQueryParameterMatch{{Name: "user", ExactMatch: ptr("alice smith")}}}}, Service: "svc-alice"},
					{Priority: 41, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/users", QueryParameterMatches: []config.HTTPQueryParameterMatch{{Name: "debug", PresentMatch: ptr(true)}}}}, Service: "svc-debug"},
					{Priority: 42, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/users", QueryParameterMatches: []config.HTTPQueryParameterMatch{{Name: "id", RegexMatch: ptr("[0-9]+")}}}}, Service: "svc-ids"},
					{Priority: 50, MatchRules: []config.HTTPRouteRuleMatch{{PathTemplateMatch: "/videos/{country}/{lang}/{file=**}"}}, Service: "svc-video",
						RouteAction: &config.HTTPRouteAction{URLRewrite: &config.URLRewrite{PathTemplateRewrite: "/{lang}/{country}/{file}"}}},
					{Priority: 51, MatchRules: []config.HTTPRouteRuleMatch{{PathTemplateMatch: "/img/*/{name}.png"}}, Service: "svc-png",
						RouteAction: &config.HTTPRouteAction{URLRewrite: &config.URLRewrite{PathTemplateRewrite: "/png/{name}"}}},
					{Priority: 60, MatchRules: []config.HTTPRouteRuleMatch{{RegexMatch: "/reports/[0-9]{4}/.*"}}, Service: "svc-reports"},
					{Priority: 70, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/range", HeaderMatches: []config.HTTPHeaderMatch{{HeaderName: "x-tier", RangeMatch: &config.Int64Range{RangeStart: -5, RangeEnd: 200}}}}}, Service: "svc-range"},
					{Priority: 71, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/inv", HeaderMatches: []config.HTTPHeaderMatch{{HeaderName: "x-block", ExactMatch: ptr("yes"), InvertMatch: true}}}}, Service: "svc-inv"},
					{Priority: 72, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/ua", HeaderMatches: []config.HTTPHeaderMatch{{HeaderName: "user-agent", SuffixMatch: ptr("bot")}}}}, Service: "svc-bot"},
					{Priority: 73, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/submit", HeaderMatches: []config.HTTPHeaderMatch{{HeaderName: ":method", ExactMatch: ptr("POST")}}}}, Service: "svc-post"},
					{Priority: 74, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/geo", HeaderMatches: []config.HTTPHeaderMatch{{HeaderName: "x-region", RegexMatch: ptr("eu-[a-z]+")}, {HeaderName: ":authority", SuffixMatch: ptr(":8443")}}}}, Service: "svc-eu"},
					{Priority: 80, MatchRules: []config.HTTPRouteRuleMatch{{FullPathMatch: "/a"}, {PrefixMatch: "/b/"}}, Service: "svc-or",
						RouteAction: &config.HTTPRouteAction{URLRewrite: &config.URLRewrite{PathPrefixRewrite: "/z/"}}},
					{Priority: 90, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/old/"}}, URLRedirect: &config.HTTPRedirectAction{PrefixRedirect: "/new/", RedirectResponseCode: "FOUND"}},
					{Priority: 91, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/gone"}}, URLRedirect: &config.HTTPRedirectAction{HostRedirect: "other.example.com", PathRedirect: "/moved", StripQuery: true, RedirectResponseCode: "PERMANENT_REDIRECT"}},
					{Priority: 95, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/mirror"}}, Service: "svc-main",
						RouteAction: &config.HTTPRouteAction{Timeout: &config.Duration{Seconds: 2, Nanos: 500_000_000}, RequestMirrorPolicy: &config.RequestMirrorPolicy{BackendService: "svc-shadow"}}},
					{Priority: 100, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/anon", HeaderMatches: []config.HTTPHeaderMatch{{HeaderName: "x-auth", PresentMatch: ptr(false)}}}}, Service: "svc-anon"},
					{Priority: 200, Service: "svc-catchall-post", MatchRules: []config.HTTPRouteRuleMatch{{HeaderMatches: []config.HTTPHeaderMatch{{HeaderName: ":method", ExactMatch: ptr("DELETE")}}}}},
				},
			},
			{
				Name:           "static",
				DefaultService: bs + "svc-static",
				PathRules: []config.PathRule{
					{Paths: []string{"/images/*"}, Service: "svc-images"},
					{Paths: []string{"/images/hd/*", "/hd"}, Service: "svc-hd"},
					{Paths: []string{"/video"}, Service: "svc-video-exact"},
					{Paths: []string{"/static/*"}, RouteAction: &config.HTTPRouteAction{
						WeightedBackendServices: []config.WeightedBackendService{{BackendService: "bucket-assets", Weight: 100}},
						URLRewrite:              &config.URLRewrite{PathPrefixRewrite: "/assets/"},
					}},
					{Paths: []string{"/legacy/*"}, URLRedirect: &config.HTTPRedirectAction{PrefixRedirect: "/modern/", RedirectResponseCode: "SEE_OTHER"}},
				},
			},
			{Name: "port8080", DefaultService: "svc-8080"},
			{Name: "wild", DefaultService: "svc-wild"},
			{Name: "wildeu", DefaultService: "svc-wildeu"},
			{Name: "dash", DefaultService: "svc-dash"},
			{Name: "redir", DefaultURLRedirect: &config.HTTPRedirectAction{HTTPSRedirect: true, RedirectResponseCode: "TEMPORARY_REDIRECT"}},
		},
	}
}

// headers returns a Request.Header func over a map, case-insensitive.
func headers(h map[string]string) func(string) (string, bool) {
	if h == nil {
		return nil
	}
	return func(name string) (string, bool) {
		for k, v := range h {
			if strings.EqualFold(k, name) {
				return v, true
			}
		}
		return "", false
	}
}

func newRequest(host, pathQuery, method string, h map[string]string) *Request {
	path, query, _ := strings.Cut(pathQuery, "?")
	if method == "" {
		method = "GET"
	}
	return &Request{Host: host, Path: path, RawQuery: query, Method: method, Header: headers(h)}
}

func mustCompile(t testing.TB, m *config.URLMap) *Table {
	t.Helper()
	tab, err := Compile(m)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return tab
}

// TestMatchGolden is the request → decision table. url is the forwarded
// host+path?query after rewrite, or the redirect Location for a redirect.
func TestMatchGolden(t *testing.T) {
	tab := mustCompile(t, goldenURLMap())
	tests := []struct {
		name   string
		host   string
		path   string
		method string
		hdr    map[string]string
		svc    string // primary service; "" for a redirect
		url    string
		code   int
		source string // suffix of Action.Source, optional
	}{
		// Hosts.
		{name: "unknown host → url map default", host: "nope.test", path: "/x", svc: "svc-default", url: "nope.test/x", source: "urlMaps[um].default"},
		{name: "empty host → default", host: "", path: "/", svc: "svc-default", url: "/"},
		{name: "host case-insensitive", host: "WWW.Example.COM", path: "/", svc: "web-v1", url: "WWW.Example.COM/"},
		{name: "host with port matches bare host rule", host: "www.example.com:443", path: "/", svc: "web-v1", url: "www.example.com:443/"},
		{name: "trailing dot ignored", host: "www.example.com.", path: "/", svc: "web-v1", url: "www.example.com./"},
		{name: "host:port rule wins for that port", host: "ports.example.net:8080", path: "/images/a", svc: "svc-8080", url: "ports.example.net:8080/images/a"},
		{name: "other port falls back to bare host", host: "ports.example.net:9090", path: "/images/a", svc: "svc-images", url: "ports.example.net:9090/images/a"},
		{name: "bare host", host: "ports.example.net", path: "/images/a", svc: "svc-images", url: "ports.example.net/images/a"},
		{name: "exact beats wildcard", host: "api.example.com", path: "/nothing", svc: "svc-api", url: "api.example.com/nothing", source: "pathMatchers[api].default"},
		{name: "wildcard", host: "foo.example.com", path: "/", svc: "svc-wild", url: "foo.example.com/"},
		{name: "longest wildcard wins", host: "foo.eu.example.com", path: "/", svc: "svc-wildeu", url: "foo.eu.example.com/"},
		{name: "wildcard needs a label", host: "example.com", path: "/", svc: "svc-default", url: "example.com/"},
		{name: "dash wildcard", host: "blue-canary.example.org", path: "/", svc: "svc-dash", url: "blue-canary.example.org/"},
		{name: "dash wildcard with port", host: "blue-canary.example.org:8443", path: "/", svc: "svc-dash", url: "blue-canary.example.org:8443/"},

		// Seed 001 canary.
		{name: "canary header → v2", host: "www.example.com", path: "/page", hdr: map[string]string{"X-Canary": "always"}, svc: "web-v2", url: "www.example.com/page", source: "routeRules[priority=1]"},
		{name: "canary header lower-case name", host: "www.example.com", path: "/", hdr: map[string]string{"x-canary": "always"}, svc: "web-v2", url: "www.example.com/"},
		{name: "canary header other value → split", host: "www.example.com", path: "/", hdr: map[string]string{"x-canary": "never"}, svc: "web-v1", url: "www.example.com/", source: "routeRules[priority=2]"},
		{name: "no header → split", host: "www.example.com", path: "/cart?x=1", svc: "web-v1", url: "www.example.com/cart?x=1", source: "urlMaps[um].pathMatchers[web].routeRules[priority=2]"},

		// Route rule predicates.
		{name: "fullPathMatch", host: "api.example.com", path: "/healthz", svc: "svc-health", url: "api.example.com/healthz"},
		{name: "fullPathMatch is not a prefix", host: "api.example.com", path: "/healthz/x", svc: "svc-api", url: "api.example.com/healthz/x"},
		{name: "header prefixMatch", host: "api.example.com", path: "/v1/users", hdr: map[string]string{"x-version": "beta-2"}, svc: "svc-beta", url: "api.example.com/v1/users"},
		{name: "header prefixMatch fails", host: "api.example.com", path: "/v1/users", hdr: map[string]string{"x-version": "stable"}, svc: "svc-api", url: "api.example.com/v1/users"},
		{name: "ignoreCase prefix + rewrite", host: "api.example.com", path: "/v2/items?q=1", svc: "svc-v2", url: "v2.internal/items?q=1"},
		{name: "ignoreCase prefix upper", host: "api.example.com", path: "/V2/Items", svc: "svc-v2", url: "v2.internal/Items"},
		{name: "query exactMatch decoded", host: "api.example.com", path: "/users?user=alice%20smith", svc: "svc-alice", url: "api.example.com/users?user=alice%20smith"},
		{name: "query exactMatch plus", host: "api.example.com", path: "/users?x=1&user=alice+smith", svc: "svc-alice", url: "api.example.com/users?x=1&user=alice+smith"},
		{name: "query presentMatch empty value", host: "api.example.com", path: "/users?debug", svc: "svc-debug", url: "api.example.com/users?debug"},
		{name: "query regexMatch", host: "api.example.com", path: "/users?id=42", svc: "svc-ids", url: "api.example.com/users?id=42"},
		{name: "query regex is anchored", host: "api.example.com", path: "/users?id=42x", svc: "svc-api", url: "api.example.com/users?id=42x"},
		{name: "query absent", host: "api.example.com", path: "/users", svc: "svc-api", url: "api.example.com/users"},
		{name: "pathTemplate rewrite", host: "api.example.com", path: "/videos/us/en/a/b.m3u8", svc: "svc-video", url: "api.example.com/en/us/a/b.m3u8"},
		{name: "pathTemplate ** zero chars", host: "api.example.com", path: "/videos/us/en/", svc: "svc-video", url: "api.example.com/en/us/"},
		{name: "pathTemplate * is one segment", host: "api.example.com", path: "/videos/us", svc: "svc-api", url: "api.example.com/videos/us"},
		{name: "pathTemplate with suffix", host: "api.example.com", path: "/img/x/logo.png", svc: "svc-png", url: "api.example.com/png/logo"},
		{name: "pathTemplate suffix miss", host: "api.example.com", path: "/img/x/logo.gif", svc: "svc-api", url: "api.example.com/img/x/logo.gif"},
		{name: "path regexMatch", host: "api.example.com", path: "/reports/2024/q1", svc: "svc-reports", url: "api.example.com/reports/2024/q1"},
		{name: "path regex anchored", host: "api.example.com", path: "/x/reports/2024/q1", svc: "svc-api", url: "api.example.com/x/reports/2024/q1"},
		{name: "rangeMatch in", host: "api.example.com", path: "/range", hdr: map[string]string{"x-tier": "-3"}, svc: "svc-range", url: "api.example.com/range"},
		{name: "rangeMatch end exclusive", host: "api.example.com", path: "/range", hdr: map[string]string{"x-tier": "200"}, svc: "svc-api", url: "api.example.com/range"},
		{name: "rangeMatch not an integer", host: "api.example.com", path: "/range", hdr: map[string]string{"x-tier": "0.25"}, svc: "svc-api", url: "api.example.com/range"},
		{name: "rangeMatch trailing junk", host: "api.example.com", path: "/range", hdr: map[string]string{"x-tier": "-3abc"}, svc: "svc-api", url: "api.example.com/range"},
		{name: "invertMatch on absent header", host: "api.example.com", path: "/inv", svc: "svc-inv", url: "api.example.com/inv"},
		{name: "invertMatch on other value", host: "api.example.com", path: "/inv", hdr: map[string]string{"x-block": "no"}, svc: "svc-inv", url: "api.example.com/inv"},
		{name: "invertMatch on equal value", host: "api.example.com", path: "/inv", hdr: map[string]string{"x-block": "yes"}, svc: "svc-api", url: "api.example.com/inv"},
		{name: "header suffixMatch", host: "api.example.com", path: "/ua", hdr: map[string]string{"User-Agent": "googlebot"}, svc: "svc-bot", url: "api.example.com/ua"},
		{name: ":method POST", host: "api.example.com", path: "/submit", method: "POST", svc: "svc-post", url: "api.example.com/submit"},
		{name: ":method GET", host: "api.example.com", path: "/submit", svc: "svc-api", url: "api.example.com/submit"},
		{name: "header regex + :authority", host: "api.example.com:8443", path: "/geo", hdr: map[string]string{"x-region": "eu-west"}, svc: "svc-eu", url: "api.example.com:8443/geo"},
		{name: ":authority mismatch", host: "api.example.com", path: "/geo", hdr: map[string]string{"x-region": "eu-west"}, svc: "svc-api", url: "api.example.com/geo"},
		{name: "OR first matchRule, full path rewritten", host: "api.example.com", path: "/a", svc: "svc-or", url: "api.example.com/z/", source: "routeRules[priority=80].matchRules[0]"},
		{name: "OR second matchRule, prefix rewritten", host: "api.example.com", path: "/b/c/d", svc: "svc-or", url: "api.example.com/z/c/d", source: "routeRules[priority=80].matchRules[1]"},
		{name: "prefixRedirect 302", host: "api.example.com", path: "/old/page?a=b", url: "http://api.example.com/new/page?a=b", code: 302},
		{name: "pathRedirect host stripQuery 308", host: "api.example.com", path: "/gone/x?a=b", url: "http://other.example.com/moved", code: 308},
		{name: "presentMatch false, absent", host: "api.example.com", path: "/anon", svc: "svc-anon", url: "api.example.com/anon"},
		{name: "presentMatch false, present", host: "api.example.com", path: "/anon", hdr: map[string]string{"x-auth": ""}, svc: "svc-api", url: "api.example.com/anon"},
		{name: "rule without path predicate", host: "api.example.com", path: "/anything", method: "DELETE", svc: "svc-catchall-post", url: "api.example.com/anything"},

		// Path rules.
		{name: "path rule prefix", host: "static.example.com", path: "/images/a.png", svc: "svc-images", url: "static.example.com/images/a.png"},
		{name: "longest path rule", host: "static.example.com", path: "/images/hd/a.png", svc: "svc-hd", url: "static.example.com/images/hd/a.png"},
		{name: "P/* does not match P", host: "static.example.com", path: "/images", svc: "svc-static", url: "static.example.com/images"},
		{name: "exact path rule", host: "static.example.com", path: "/video", svc: "svc-video-exact", url: "static.example.com/video"},
		{name: "exact path rule not prefix", host: "static.example.com", path: "/video/x", svc: "svc-static", url: "static.example.com/video/x"},
		{name: "second path of a rule", host: "static.example.com", path: "/hd", svc: "svc-hd", url: "static.example.com/hd"},
		{name: "path rule weighted + rewrite", host: "static.example.com", path: "/static/css/a.css?v=3", svc: "bucket-assets", url: "static.example.com/assets/css/a.css?v=3"},
		{name: "path rule redirect 303", host: "static.example.com", path: "/legacy/x", url: "http://static.example.com/modern/x", code: 303},
		{name: "not substring", host: "static.example.com", path: "/imagesx/a", svc: "svc-static", url: "static.example.com/imagesx/a"},

		// Default redirect.
		{name: "matcher default redirect https 307", host: "redirect.example.com:80", path: "/p?q=1", url: "https://redirect.example.com/p?q=1", code: 307},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRequest(tc.host, tc.path, tc.method, tc.hdr)
			a := tab.Match(r)
			if a == nil {
				t.Fatal("Match returned nil")
			}
			if tc.source != "" && !strings.HasSuffix(a.Source, tc.source) {
				t.Errorf("Source = %q, want suffix %q", a.Source, tc.source)
			}
			if tc.code != 0 {
				if a.Redirect == nil {
					t.Fatalf("got %s, want redirect %d", describe(a, r), tc.code)
				}
				if a.Redirect.Code != tc.code {
					t.Errorf("redirect code = %d, want %d", a.Redirect.Code, tc.code)
				}
				if got := a.RedirectURL(r, "http"); got != tc.url {
					t.Errorf("RedirectURL = %q, want %q", got, tc.url)
				}
				if len(a.Services) != 0 {
					t.Errorf("redirect has services %v", a.Services)
				}
				return
			}
			if a.Redirect != nil {
				t.Fatalf("got %s, want service %s", describe(a, r), tc.svc)
			}
			if got := a.primary(); got != tc.svc {
				t.Errorf("service = %q (%s), want %q", got, a.Source, tc.svc)
			}
			if got := stripScheme(forwardedURL(a, r)); got != tc.url {
				t.Errorf("forwarded URL = %q, want %q", got, tc.url)
			}
		})
	}
	t.Logf("%d golden cases", len(tests))
}

func TestActionDetails(t *testing.T) {
	tab := mustCompile(t, goldenURLMap())
	a := tab.Match(newRequest("api.example.com", "/healthz", "", nil))
	var got []string
	for _, h := range a.HeaderActions {
		got = append(got, h.RequestHeadersToAdd[0].HeaderValue)
	}
	if strings.Join(got, ",") != "rule,pm,urlmap" {
		t.Errorf("header action order = %v, want rule,pm,urlmap", got)
	}
	a = tab.Match(newRequest("api.example.com", "/mirror", "", nil))
	if a.Timeout != 2500*time.Millisecond || a.Mirror == nil || a.Mirror.BackendService != "svc-shadow" {
		t.Errorf("mirror rule: timeout %v mirror %+v", a.Timeout, a.Mirror)
	}
	a = tab.Match(newRequest("www.example.com", "/", "", nil))
	if a.Timeout != 20*time.Second || a.Retry == nil || *a.Retry.NumRetries != 2 {
		t.Errorf("canary split: timeout %v retry %+v", a.Timeout, a.Retry)
	}
	if len(a.HeaderActions) != 1 {
		t.Errorf("canary split header actions = %d, want 1 (url map)", len(a.HeaderActions))
	}
	if d := tab.Match(newRequest("nope", "/", "", nil)); d != tab.Default() || d.Source != "urlMaps[um].default" {
		t.Errorf("default = %+v", d)
	}
}

// TestCanarySplit checks seed 001's 950/50 split over 100000 seeded draws.
func TestCanarySplit(t *testing.T) {
	tab := mustCompile(t, goldenURLMap())
	a := tab.Match(newRequest("www.example.com", "/", "", nil))
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 100000
	counts := map[string]int{}
	for range n {
		name, i := a.PickService(rng.Uint64())
		if a.Services[i].Name != name {
			t.Fatalf("index %d names %q, not %q", i, a.Services[i].Name, name)
		}
		counts[name]++
	}
	v2 := 100 * float64(counts["web-v2"]) / n
	if v2 < 4.5 || v2 > 5.5 || counts["web-v1"]+counts["web-v2"] != n {
		t.Errorf("web-v2 share = %.2f%% (%v), want 5 ± 0.5", v2, counts)
	}
}

func TestPickService(t *testing.T) {
	a := &Action{}
	for _, w := range []int{0, 3, 0, 1, 0} {
		a.Services = append(a.Services, WeightedService{Name: "s", Weight: w})
		a.total += uint64(w)
		a.cum = append(a.cum, a.total)
	}
	for _, u := range []uint64{0, 1, 1 << 62, 3 << 62, 3<<62 - 1, ^uint64(0)} {
		_, i := a.PickService(u)
		if a.Services[i].Weight == 0 {
			t.Errorf("PickService(%#x) picked zero-weight index %d", u, i)
		}
	}
	if _, i := a.PickService(0); i != 1 {
		t.Errorf("PickService(0) = %d, want 1", i)
	}
	if _, i := a.PickService(^uint64(0)); i != 3 {
		t.Errorf("PickService(max) = %d, want 3", i)
	}
	if name, i := (&Action{Redirect: &Redirect{}}).PickService(7); name != "" || i != -1 {
		t.Errorf("redirect PickService = %q, %d", name, i)
	}
	if n := testing.AllocsPerRun(100, func() { a.PickService(12345) }); n != 0 {
		t.Errorf("PickService allocates %v", n)
	}
}

func TestMatchAllocs(t *testing.T) {
	tab := mustCompile(t, goldenURLMap())
	h := map[string]string{"X-Version": "beta-1"}
	hf := func(name string) (string, bool) { v, ok := h[name]; return v, ok }
	for _, r := range []*Request{
		{Host: "api.example.com", Path: "/v1/users", Method: "GET", Header: hf},                      // exact host + prefix + header
		{Host: "API.Example.com:443", Path: "/users", RawQuery: "user=alice%20smith", Method: "GET"}, // upper-case host, port, query
		{Host: "www.example.com", Path: "/", Method: "GET", Header: hf},                              // canary split
		{Host: "static.example.com", Path: "/images/hd/x", Method: "GET"},                            // path rules
		{Host: "x.eu.example.com", Path: "/", Method: "GET"},                                         // wildcard
	} {
		a := tab.Match(r)
		if n := testing.AllocsPerRun(200, func() { tab.Match(r) }); n != 0 {
			t.Errorf("Match(%s%s) → %s allocates %v per run", r.Host, r.Path, a.Source, n)
		}
	}
	r := &Request{Host: "api.example.com", Path: "/v1/users", Method: "GET", Header: hf}
	if a := tab.Match(r); a.primary() != "svc-beta" {
		t.Fatalf("alloc case matched %s", a.Source)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(m *config.URLMap)
		want string
	}{
		{"no default", func(m *config.URLMap) { m.DefaultService = "" }, "no default"},
		{"unknown matcher", func(m *config.URLMap) { m.HostRules[0].PathMatcher = "nope" }, `unknown path matcher "nope"`},
		{"duplicate host", func(m *config.URLMap) { m.HostRules[1].Hosts = []string{"WWW.example.com"} }, "more than one host rule"},
		{"bad wildcard", func(m *config.URLMap) { m.HostRules[1].Hosts = []string{"*foo.com"} }, "'*' must be followed"},
		{"duplicate priority", func(m *config.URLMap) { m.PathMatchers[0].RouteRules[1].Priority = 1 }, "priority used by more than one"},
		{"bad regex", func(m *config.URLMap) { m.PathMatchers[1].RouteRules[8].MatchRules[0].RegexMatch = "(" }, "regexMatch"},
		{"template rewrite unknown var", func(m *config.URLMap) {
			m.PathMatchers[1].RouteRules[6].RouteAction.URLRewrite.PathTemplateRewrite = "/{nope}"
		}, `variable "nope" is not captured`},
		{"bad redirect code", func(m *config.URLMap) { m.PathMatchers[1].RouteRules[15].URLRedirect.RedirectResponseCode = "TEAPOT" }, "unknown code"},
		{"zero weights", func(m *config.URLMap) {
			for i := range m.PathMatchers[0].RouteRules[1].RouteAction.WeightedBackendServices {
				m.PathMatchers[0].RouteRules[1].RouteAction.WeightedBackendServices[i].Weight = 0
			}
		}, "weights sum to 0"},
		{"service and redirect", func(m *config.URLMap) { m.PathMatchers[0].RouteRules[0].URLRedirect = &config.HTTPRedirectAction{} }, "exactly one of"},
		{"bad path rule star", func(m *config.URLMap) { m.PathMatchers[2].PathRules[0].Paths = []string{"/images*"} }, "'*' is allowed only"},
		{"duplicate path", func(m *config.URLMap) { m.PathMatchers[2].PathRules[1].Paths = []string{"/images/*"} }, "more than one path rule"},
		{"both rule kinds", func(m *config.URLMap) {
			m.PathMatchers[2].RouteRules = []config.HTTPRouteRule{{Priority: 1, Service: "x"}}
		}, "not both"},
		{"two header predicates", func(m *config.URLMap) {
			m.PathMatchers[0].RouteRules[0].MatchRules[0].HeaderMatches[0].PrefixMatch = ptr("a")
		}, "exactly one of"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := goldenURLMap()
			tc.edit(m)
			_, err := Compile(m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Compile error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// NextDraw spreads a weighted split evenly: a 95/5 canary gets 5 of every
// 100 requests (random draws: 5 ± 2.2), and 1 of every 20 over any 20.
func TestNextDrawSplitsEvenly(t *testing.T) {
	a := &Action{}
	for _, w := range []int{95, 5} {
		a.Services = append(a.Services, WeightedService{Name: "s", Weight: w})
		a.total += uint64(w)
		a.cum = append(a.cum, a.total)
	}
	canary := 0
	for i := 1; i <= 1000; i++ {
		if _, k := a.PickService(a.NextDraw()); k == 1 {
			canary++
		}
		if i%100 == 0 && (canary < i/20-1 || canary > i/20+1) {
			t.Fatalf("after %d requests the canary had %d, want %d ± 1", i, canary, i/20)
		}
	}
}

// TestServices: every service a rule of the URL map can pick, at every
// level (URL map default, path matcher defaults, path rules, route rules,
// weighted splits), and none of a redirect.
func TestServices(t *testing.T) {
	got := mustCompile(t, goldenURLMap()).Services()
	want := map[string]bool{}
	m := goldenURLMap()
	add := func(s string, ra *config.HTTPRouteAction) {
		if s != "" {
			want[config.RefName(s)] = true
		}
		if ra != nil {
			for _, w := range ra.WeightedBackendServices {
				want[config.RefName(w.BackendService)] = true
			}
		}
	}
	add(m.DefaultService, m.DefaultRouteAction)
	for _, pm := range m.PathMatchers {
		add(pm.DefaultService, pm.DefaultRouteAction)
		for _, pr := range pm.PathRules {
			add(pr.Service, pr.RouteAction)
		}
		for _, rr := range pm.RouteRules {
			add(rr.Service, rr.RouteAction)
		}
	}
	if len(got) != len(want) || len(got) < 10 {
		t.Fatalf("Services() = %v (%d), want the %d of the config: %v", got, len(got), len(want), want)
	}
	for i, s := range got {
		if !want[s] || i > 0 && got[i-1] >= s {
			t.Errorf("Services() = %v: %q unexpected or out of order", got, s)
		}
	}
}
