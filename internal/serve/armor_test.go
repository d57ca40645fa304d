package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/geoip/geoiptest"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
	"github.com/spillwaylb/spillway/internal/waf"
)

// armorConfig is one service behind a backend policy (deny /admin,
// deny 127.0.0.2, preview a deny of /preview, add a header on /tagged,
// throttle /api to 10 per 10 s per IP, redirect /old) and an edge policy
// (deny a User-Agent).
func armorConfig(backend, logPath, extraRule string) string {
	host, port, _ := net.SplitHostPort(backend)
	return fmt.Sprintf(`
networkEndpointGroups:
- name: neg
  zone: us-east1-b
  endpoints: [{ipAddress: %s, port: %s}]
backendServices:
- name: bs
  backends: [{group: neg, balancingMode: RATE, maxRatePerEndpoint: 100000}]
  securityPolicy: armor-web
  edgeSecurityPolicy: armor-edge
securityPolicies:
- name: armor-edge
  type: CLOUD_ARMOR_EDGE
  rules:
  - {priority: 10, action: deny(403), match: {expr: {expression: "request.headers['user-agent'].lower().contains('badbot')"}}}
  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}
- name: armor-web
  rules:
  - {priority: 100, action: deny(404), match: {expr: {expression: "request.path.startsWith('/admin')"}}}
  - {priority: 200, action: deny(403), match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['127.0.0.2/32']}}}
  - {priority: 300, action: deny(403), preview: true, match: {expr: {expression: "request.path == '/preview'"}}}
  - {priority: 400, action: allow, headerAction: {requestHeadersToAdds: [{headerName: X-Armor-Rule, headerValue: "400"}]}, match: {expr: {expression: "request.path == '/tagged'"}}}
  - priority: 500
    action: throttle
    match: {expr: {expression: "request.path.startsWith('/api')"}}
    rateLimitOptions: {rateLimitThreshold: {count: 10, intervalSec: 10}, conformAction: allow, exceedAction: deny(429), enforceOnKey: IP}
  - {priority: 600, action: redirect, redirectOptions: {type: EXTERNAL_302, target: "https://example.com/moved"}, match: {expr: {expression: "request.path == '/old'"}}}
%s  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}
urlMaps:
- {name: um, defaultService: bs}
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}
spillway:
  accessLog: {enable: true, path: %s, format: JSON}
`, host, port, extraRule, logPath)
}

// Security policies with real requests: each action and match kind, a
// refused request never reaching the backend, the access log's and
// /metrics' view, and a reload keeping the rate limit's counts.
func TestSecurityPolicies(t *testing.T) {
	var hits atomic.Int64
	tagged := make(chan string, 1)
	be := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/tagged" {
			tagged <- r.Header.Get("X-Armor-Rule")
		}
		io.WriteString(w, "backend")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go be.Serve(ln)
	t.Cleanup(func() { be.Close() })
	dir := t.TempDir()
	logPath := filepath.Join(dir, "access.log")
	cfgPath := filepath.Join(dir, "spillway.yaml")
	y := armorConfig(ln.Addr().String(), logPath, "")
	if err := os.WriteFile(cfgPath, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	front := "http://" + s.FrontendAddr("fe")
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(c *http.Client, path string, hdr ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", front+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	refused := func(name string, resp *http.Response, status int, details string) {
		t.Helper()
		before := hits.Load()
		if resp.StatusCode != status || resp.Header.Get("X-Spillway-Status-Details") != details {
			t.Errorf("%s: %d %q, want %d %q", name, resp.StatusCode, resp.Header.Get("X-Spillway-Status-Details"), status, details)
		}
		if hits.Load() != before {
			t.Errorf("%s: the refused request reached the backend", name)
		}
	}
	refused("deny(404) by path", get(client, "/admin/users"), 404, "denied_by_security_policy")
	refused("edge deny by header", get(client, "/", "User-Agent", "BadBot/2.0"), 403, "denied_by_security_policy")
	if resp := get(client, "/old"); resp.StatusCode != 302 || resp.Header.Get("Location") != "https://example.com/moved" {
		t.Errorf("redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := get(client, "/preview"); resp.StatusCode != 200 {
		t.Errorf("a preview rule was enforced: %d", resp.StatusCode)
	}
	if resp := get(client, "/tagged"); resp.StatusCode != 200 || <-tagged != "400" {
		t.Errorf("headerAction: the backend did not get X-Armor-Rule: 400")
	}

	// Source ranges: the same request from 127.0.0.2 is denied.
	from2 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	refused("deny by source range", get(from2, "/"), 403, "denied_by_security_policy")

	// Throttle: 10 of 30 requests within a second go through.
	before := hits.Load()
	ok, limited := 0, 0
	for range 30 {
		switch get(client, "/api/x").StatusCode {
		case 200:
			ok++
		case 429:
			limited++
		}
	}
	if ok != 10 || limited != 20 || hits.Load()-before != 10 {
		t.Errorf("throttle: %d allowed, %d limited, %d reached the backend; want 10, 20, 10", ok, limited, hits.Load()-before)
	}
	// A reload that keeps the rule keeps its counts: still limited.
	y2 := armorConfig(ln.Addr().String(), logPath, "  - {priority: 700, action: deny(403), match: {expr: {expression: \"request.path == '/new'\"}}}\n")
	if err := s.Reload(context.Background(), servetest.Parse(t, y2)); err != nil {
		t.Fatal(err)
	}
	if resp := get(client, "/api/x"); resp.StatusCode != 429 {
		t.Errorf("after a reload the throttle forgot its counts: %d", resp.StatusCode)
	}
	refused("a rule added by reload", get(client, "/new"), 403, "denied_by_security_policy")

	// A reload with a bad expression is rejected; the old policy serves.
	bad := armorConfig(ln.Addr().String(), logPath, "  - {priority: 700, action: deny(403), match: {expr: {expression: \"request.nosuch == 'x'\"}}}\n")
	if err := s.Reload(context.Background(), servetest.Parse(t, bad)); err == nil || !strings.Contains(err.Error(), "securityPolicies[armor-web].rules[6]") {
		t.Errorf("reload with a bad expression: %v, want an error naming the rule", err)
	}
	refused("after a rejected reload", get(client, "/new"), 403, "denied_by_security_policy")

	checkArmorMetrics(t, s.AdminAddr())
	checkArmorLog(t, logPath)
}

func checkArmorMetrics(t *testing.T, admin string) {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The dashboard's state lists the rules hit most; the throttle's
	// 20+ exceeded requests come first.
	resp, err = http.Get("http://" + admin + "/ui/state")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		SecurityRules []struct {
			Policy   string `json:"policy"`
			Priority int64  `json:"priority"`
			Result   string `json:"result"`
			Count    uint64 `json:"count"`
		} `json:"securityRules"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || len(st.SecurityRules) == 0 || st.SecurityRules[0].Priority != 500 || st.SecurityRules[0].Result != "DENY" || st.SecurityRules[0].Count < 20 {
		t.Errorf("/ui/state securityRules = %+v (%v), want the throttle's DENY first", st.SecurityRules, err)
	}
	for _, want := range []string{
		`spillway_security_policy_requests_total{policy="armor-web",preview="false",priority="100",result="DENY"} 1`,
		`spillway_security_policy_requests_total{policy="armor-web",preview="true",priority="300",result="DENY"} 1`,
		`spillway_security_policy_requests_total{policy="armor-edge",preview="false",priority="10",result="DENY"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func checkArmorLog(t *testing.T, path string) {
	t.Helper()
	type policyLog struct {
		Name             string `json:"name"`
		Priority         int64  `json:"priority"`
		Outcome          string `json:"outcome"`
		ConfiguredAction string `json:"configuredAction"`
		RateLimitAction  *struct {
			Key     string `json:"key"`
			Outcome string `json:"outcome"`
		} `json:"rateLimitAction"`
	}
	var line struct {
		HTTPRequest struct {
			RequestURL string `json:"requestUrl"`
		} `json:"httpRequest"`
		Payload struct {
			StatusDetails string     `json:"statusDetails"`
			Enforced      *policyLog `json:"enforcedSecurityPolicy"`
			Edge          *policyLog `json:"enforcedEdgeSecurityPolicy"`
			Preview       *policyLog `json:"previewSecurityPolicy"`
		} `json:"jsonPayload"`
	}
	seen := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < 3 && time.Now().Before(deadline) {
		f, err := os.Open(path)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			p := line.Payload
			switch {
			case strings.HasSuffix(line.HTTPRequest.RequestURL, "/admin/users") && p.Enforced != nil && p.Enforced.Priority == 100 && p.Enforced.Outcome == "DENY" && p.Enforced.ConfiguredAction == "DENY" && p.StatusDetails == "denied_by_security_policy" && p.Edge != nil && p.Edge.Outcome == "ACCEPT":
				seen["deny"] = true
			case strings.HasSuffix(line.HTTPRequest.RequestURL, "/preview") && p.Preview != nil && p.Preview.Priority == 300 && p.Preview.Outcome == "DENY" && p.Enforced != nil && p.Enforced.Outcome == "ACCEPT":
				seen["preview"] = true
			case p.Enforced != nil && p.Enforced.RateLimitAction != nil && p.Enforced.RateLimitAction.Outcome == "RATE_LIMIT_THRESHOLD_EXCEED" && p.Enforced.RateLimitAction.Key == "127.0.0.1":
				seen["throttle"] = true
			}
		}
		f.Close()
		if len(seen) < 3 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if len(seen) < 3 {
		t.Errorf("access log: found %v of deny, preview and throttle entries", seen)
	}
}

// A rule calling the preconfigured WAF blocks a SQL injection, in the
// query or in a form body, with the CRS signature in the access log, and
// lets ordinary requests through.
func TestSecurityPolicyWAF(t *testing.T) {
	var hits atomic.Int64
	be := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go be.Serve(ln)
	t.Cleanup(func() { be.Close() })
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	logPath := filepath.Join(t.TempDir(), "access.log")
	y := fmt.Sprintf(`
networkEndpointGroups: [{name: neg, zone: us-east1-b, endpoints: [{ipAddress: %s, port: %s}]}]
backendServices: [{name: bs, securityPolicy: waf, backends: [{group: neg, balancingMode: RATE, maxRatePerEndpoint: 100000}]}]
securityPolicies:
- name: waf
  rules:
  - {priority: 1000, action: deny(403), match: {expr: {expression: "evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1})"}}}
  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}
urlMaps: [{name: um, defaultService: bs}]
frontends: [{name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}]
spillway: {accessLog: {enable: true, path: %s, format: JSON}}
`, host, port, logPath)
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{WatchInterval: -1, WAF: waf.ForArmor(waf.Options{})})
	front := "http://" + s.FrontendAddr("fe")
	get := func(path string) int {
		resp, err := http.Get(front + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("/products?id=1%27%20OR%20%271%27%3D%271"); code != 403 || hits.Load() != 0 {
		t.Fatalf("SQL injection: %d, %d backend hits; want 403 and none", code, hits.Load())
	}
	if code := get("/products?id=42&sort=price"); code != 200 || hits.Load() != 1 {
		t.Fatalf("ordinary request: %d, %d backend hits; want 200 and 1", code, hits.Load())
	}
	post := func(body string) int {
		resp, err := http.Post(front+"/products", "application/x-www-form-urlencoded", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("id=1%27%20OR%20%271%27%3D%271"); code != 403 || hits.Load() != 1 {
		t.Fatalf("SQL injection in a form body: %d, %d backend hits; want 403 and 1", code, hits.Load())
	}
	if code := post("id=42&sort=price"); code != 200 || hits.Load() != 2 {
		t.Fatalf("ordinary form: %d, %d backend hits; want 200 and 2", code, hits.Load())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b), `"preconfiguredExprIds":["owasp-crs-v`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the access log has no preconfiguredExprIds:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// spillway.geoDatabase places clients for security policies: a rule on
// origin.region_code denies the client at 127.0.0.2 (placed in NL by the
// test database), and a REGION_CODE rate limit counts by country.
func TestSecurityPolicyRegionCode(t *testing.T) {
	be := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go be.Serve(ln)
	t.Cleanup(func() { be.Close() })
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	db := geoiptest.Countries(t, map[string]string{"127.0.0.2/32": "NL", "127.0.0.1/32": "US"})
	y := fmt.Sprintf(`
networkEndpointGroups: [{name: neg, zone: us-east1-b, endpoints: [{ipAddress: %s, port: %s}]}]
backendServices: [{name: bs, securityPolicy: geo, backends: [{group: neg, balancingMode: RATE, maxRatePerEndpoint: 100000}]}]
securityPolicies:
- name: geo
  rules:
  - {priority: 10, action: deny(403), match: {expr: {expression: "origin.region_code == 'NL'"}}}
  - priority: 20
    action: throttle
    match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}
    rateLimitOptions: {rateLimitThreshold: {count: 2, intervalSec: 60}, conformAction: allow, exceedAction: deny(429), enforceOnKey: REGION_CODE}
  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}
urlMaps: [{name: um, defaultService: bs}]
frontends: [{name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}]
spillway: {geoDatabase: %s}
`, host, port, db)
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{WatchInterval: -1})
	front := "http://" + s.FrontendAddr("fe") + "/"
	from := func(ip net.IP) int {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}).DialContext}}
		resp, err := c.Get(front)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := from(net.IPv4(127, 0, 0, 2)); code != 403 {
		t.Errorf("client in NL: %d, want 403", code)
	}
	var got []int
	for range 3 {
		got = append(got, from(net.IPv4(127, 0, 0, 1)))
	}
	if got[0] != 200 || got[1] != 200 || got[2] != 429 {
		t.Errorf("client in US, 3 requests against 2 per minute per region: %v, want [200 200 429]", got)
	}
	// A reload naming a file that is not a database is rejected.
	bad := strings.Replace(y, db, filepath.Join(t.TempDir(), "missing.mmdb"), 1)
	if err := s.Reload(context.Background(), servetest.Parse(t, bad)); err == nil || !strings.Contains(err.Error(), "spillway.geoDatabase") {
		t.Errorf("reload with a missing database: %v", err)
	}
}

// advancedOptionsConfig.jsonParsing STANDARD inspects a JSON body value
// by value: a SQL injection inside a value that the body inspected
// whole (the default) lets through at sensitivity 1 is denied, also for
// a jsonCustomConfig content type, while ordinary JSON goes through;
// logLevel VERBOSE puts where the signature matched in the access log.
func TestSecurityPolicyJSONParsing(t *testing.T) {
	var hits atomic.Int64
	be := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go be.Serve(ln)
	t.Cleanup(func() { be.Close() })
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	logPath := filepath.Join(t.TempDir(), "access.log")
	y := fmt.Sprintf(`
networkEndpointGroups: [{name: neg, zone: us-east1-b, endpoints: [{ipAddress: %s, port: %s}]}]
backendServices:
- {name: bs-whole, securityPolicy: whole, backends: [{group: neg, balancingMode: RATE, maxRatePerEndpoint: 100000}]}
- {name: bs-parsed, securityPolicy: parsed, backends: [{group: neg, balancingMode: RATE, maxRatePerEndpoint: 100000}]}
securityPolicies:
- name: whole
  rules: &rules
  - {priority: 1000, action: deny(403), match: {expr: {expression: "evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1})"}}}
  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}
- name: parsed
  advancedOptionsConfig: {jsonParsing: STANDARD, jsonCustomConfig: {contentTypes: [text/x-shop]}, logLevel: VERBOSE}
  rules: *rules
urlMaps:
- name: um
  defaultService: bs-whole
  hostRules: [{hosts: ['*'], pathMatcher: pm}]
  pathMatchers: [{name: pm, defaultService: bs-whole, pathRules: [{paths: ['/parsed/*'], service: bs-parsed}]}]
frontends: [{name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}]
spillway: {accessLog: {enable: true, path: %s, format: JSON}}
`, host, port, logPath)
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{WatchInterval: -1, WAF: waf.ForArmor(waf.Options{})})
	front := "http://" + s.FrontendAddr("fe")
	const injected = `{"customer_id":"1' or '1'='1","items":[]}`
	const ordinary = `{"customer_id":123,"items":[{"sku":"AB-1234","qty":2}],"note":"Please leave it at the front door","gift":false}`
	for _, tc := range []struct {
		path, typ, body string
		want            int
	}{
		{"/whole/orders", "application/json", injected, 200},
		{"/parsed/orders", "application/json", injected, 403},
		{"/parsed/orders", "application/json; charset=utf-8", injected, 403},
		{"/parsed/orders", "text/x-shop", injected, 403},
		{"/parsed/orders", "application/json", ordinary, 200},
		{"/whole/orders", "application/json", ordinary, 200},
	} {
		before := hits.Load()
		resp, err := http.Post(front+tc.path, tc.typ, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		reached := hits.Load() - before
		if resp.StatusCode != tc.want || reached != int64(b2i(tc.want == 200)) {
			t.Errorf("POST %s (%s) %s: %d, %d backend hits; want %d", tc.path, tc.typ, tc.body, resp.StatusCode, reached, tc.want)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if strings.Count(string(b), `"matchedFieldName":"json.customer_id"`) == 3 {
			if !strings.Contains(string(b), `"matchedFieldType":"ARGS"`) || !strings.Contains(string(b), `"matchedFieldLength":12`) {
				t.Errorf("verbose fields:\n%s", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the access log lacks the verbose fields of 3 denials:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
