package waf

import (
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseCall: the call parser never panics, accepts only valid
// SetRefs, and reads back what Expression writes.
func FuzzParseCall(f *testing.F) {
	for _, s := range []string{
		"evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1})",
		"evaluatePreconfiguredWaf('sqli-v422-stable', {'sensitivity': 4, 'opt_out_rule_ids': ['owasp-crs-v042200-id942350-sqli']})",
		"evaluatePreconfiguredWaf('json-sqli-canary', {'sensitivity':0, 'opt_in_rule_ids': ['owasp-crs-id942550-sqli']})",
		"evaluatePreconfiguredExpr('xss-stable', ['owasp-crs-v030001-id941110-xss',])",
		`evaluatePreconfiguredWaf("cve-canary")`,
		"evaluatePreconfiguredWaf('a\\'b', {})",
		"evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': -99999999999})",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		ref, err := ParseCall(text)
		if err != nil {
			return
		}
		if err := ref.Validate(); err != nil {
			t.Fatalf("ParseCall(%q) = %+v, which Validate refuses: %v", text, ref, err)
		}
		back, err := ParseCall(ref.Expression())
		if err != nil {
			t.Fatalf("ParseCall(%q) refuses Expression %q: %v", text, ref.Expression(), err)
		}
		if !reflect.DeepEqual(normalizeRef(back), normalizeRef(ref)) {
			t.Fatalf("round trip of %q: %+v, then %+v", text, ref, back)
		}
	})
}

func normalizeRef(r SetRef) SetRef {
	if len(r.OptOut) == 0 {
		r.OptOut = nil
	}
	if len(r.OptIn) == 0 {
		r.OptIn = nil
	}
	return r
}

// FuzzParseWaf: set names, sensitivities and signature lists in any
// combination are parsed or refused, never a panic, and what is accepted
// compiles.
func FuzzParseWaf(f *testing.F) {
	f.Add("sqli-v33-stable", int64(1), "owasp-crs-v030301-id942251-sqli", false)
	f.Add("xss-v422-canary", int64(0), "owasp-crs-v042200-id941100-xss,owasp-crs-v042200-id941110-xss", true)
	f.Add("json-sqli-canary", int64(0), "owasp-crs-id942550-sqli", true)
	f.Add("nodejs-v422-stable", int64(9), "owasp-crs-v042200-id934100-generic", false)
	f.Add("scannerdetection-stable", int64(2), "owasp-crs-v030001-id913101-scannerdetection", false)
	c := newCompilerT(f)
	f.Fuzz(func(t *testing.T, set string, sensitivity int64, ids string, optIn bool) {
		key := keyOptOut
		if optIn {
			key = keyOptIn
		}
		var list []any
		for _, id := range strings.Split(ids, ",") {
			list = append(list, id)
		}
		ref, err := ParseWaf(set, map[string]any{keySensitivity: sensitivity, key: list})
		if err != nil {
			return
		}
		if _, err := c.Compile([]SetRef{ref}, Options{}); err != nil {
			t.Fatalf("ParseWaf accepted %+v, Compile refuses it: %v", ref, err)
		}
	})
}

// FuzzEvaluate: any method, target, header and body, a header repeated
// up to 64 Ki times, evaluated with every set at sensitivity 4 and JSON
// parsing on: no panic, one result per set, and a head past the budget
// is reported cut.
func FuzzEvaluate(f *testing.F) {
	f.Add("GET", "/?id=1' or '1'='1", "X-A", "v", uint16(1), "", []byte(nil))
	f.Add("POST", "/", "Cookie", "a=b; c=d", uint16(3), "application/json", []byte(strings.Repeat("[", 8192)))
	f.Add("POST", "/", "X-Pad", strings.Repeat("p", 1000), uint16(100), "application/json", []byte(strings.Repeat(`{"a":`, 1600)))
	f.Add("POST", "/", "X-A", "v", uint16(1), "application/x-www-form-urlencoded", []byte(strings.Repeat("a=&", 2730)))
	f.Add("POST", "/", "X-A", "v", uint16(1), "multipart/form-data; boundary=x", []byte(strings.Repeat("--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nb\r\n", 150)))
	f.Add("GET", strings.Repeat("/a", 40000), "User-Agent", "sqlmap", uint16(65535), "", []byte(nil))
	c := newCompilerT(f)
	e := compileT(f, c, refsAt(f, 4, benchSets()...), Options{JSONParsing: true})
	f.Fuzz(func(t *testing.T, method, target, name, value string, repeat uint16, contentType string, body []byte) {
		r := &http.Request{
			Method: method, RequestURI: target, URL: &url.URL{Path: "/"}, Proto: "HTTP/1.1",
			Host: "example.com", Header: http.Header{}, RemoteAddr: "192.0.2.1:1234",
		}
		for range int(repeat) % 1024 {
			r.Header.Add(name, value)
		}
		if repeat >= 1024 {
			r.Header[name] = append(r.Header[name], strings.Repeat(value, int(repeat)%64+1))
		}
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		res := e.Evaluate(r, body)
		if len(res.Sets) != len(e.Sets()) {
			t.Fatalf("%d results for %d sets", len(res.Sets), len(e.Sets()))
		}
		head := len(target) + len(r.Host) + len("Host")
		for k, vs := range r.Header {
			for _, v := range vs {
				head += len(k) + len(v)
			}
		}
		if head > DefaultMaxHeadBytes && !res.HeadTruncated {
			t.Fatalf("a %d-byte head inspected whole", head)
		}
		if len(body) > DefaultMaxBodyBytes && !res.BodyTruncated {
			t.Fatalf("a %d-byte body inspected whole", len(body))
		}
	})
}
