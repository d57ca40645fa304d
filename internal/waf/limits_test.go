package waf

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rawRequest builds a server-side request as net/http would hand it over,
// from any target and headers, without parsing the target.
func rawRequest(method, target string, h http.Header) *http.Request {
	if h == nil {
		h = http.Header{}
	}
	return &http.Request{
		Method: method, RequestURI: target, URL: &url.URL{Path: "/"}, Proto: "HTTP/1.1",
		Host: "example.com", Header: h, RemoteAddr: "192.0.2.1:40000",
	}
}

func numbered(n int, format, sep string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(format, i)
	}
	return strings.Join(parts, sep)
}

// TestValueLimits: past MaxValues, query and body arguments, cookies and
// header lines are left uninspected and the result says which; the values
// before the limit are inspected.
func TestValueLimits(t *testing.T) {
	e := compileT(t, newCompilerT(t), refsAt(t, 1, "xss-v33-stable"), Options{MaxValues: 100, JSONParsing: true, MaxBodyBytes: MaxMaxBodyBytes})
	xss := "%3Cscript%3Ealert(1)%3C%2Fscript%3E"
	lines := http.Header{}
	for i := range 150 {
		lines.Add(fmt.Sprintf("X-H%03d", i), "v")
	}
	lines.Set("X-H000", "<script>alert(1)</script>")
	cases := []struct {
		name                 string
		r                    *http.Request
		body                 string
		match, head, argsCut bool
	}{
		{"attack in the first query argument", rawRequest("GET", "/?q="+xss+"&"+numbered(150, "a%d=1", "&"), nil), "", true, false, true},
		{"attack past the query limit", rawRequest("GET", "/?"+numbered(150, "a%d=1", "&")+"&q="+xss, nil), "", false, false, true},
		{"attack past the form limit", withType(rawRequest("POST", "/", nil), "application/x-www-form-urlencoded"), numbered(150, "a%d=1", "&") + "&q=" + xss, false, false, true},
		{"attack past the JSON limit", withType(rawRequest("POST", "/", nil), "application/json"), "[" + numbered(150, "%d", ",") + `,"<script>alert(1)</script>"]`, false, false, true},
		{"attack past the multipart limit", multipartRequest(150, "q", "<script>alert(1)</script>"), "", false, false, true},
		{"attack in the first cookie", rawRequest("GET", "/", http.Header{"Cookie": {"q=<script>alert(1)</script>; " + numbered(150, "c%d=1", "; ")}}), "", true, true, false},
		{"attack past the cookie limit", rawRequest("GET", "/", http.Header{"Cookie": {numbered(150, "c%d=1", "; ") + "; q=<script>alert(1)</script>"}}), "", false, true, false},
		{"attack in the first of 150 header lines", rawRequest("GET", "/", lines), "", true, true, false},
	}
	for _, tc := range cases {
		body := []byte(tc.body)
		if tc.body == "" && tc.r.Method == "POST" {
			body = multipartBodies[tc.r]
		}
		res := e.Evaluate(tc.r, body)
		if res.Matched(0) != tc.match || res.HeadTruncated != tc.head || res.ArgsTruncated != tc.argsCut {
			t.Errorf("%s: matched %t, head cut %t, arguments cut %t; want %t, %t, %t", tc.name,
				res.Matched(0), res.HeadTruncated, res.ArgsTruncated, tc.match, tc.head, tc.argsCut)
		}
	}
}

func withType(r *http.Request, ct string) *http.Request {
	r.Header.Set("Content-Type", ct)
	return r
}

// multipartBodies holds the bodies multipartRequest built, by request.
var multipartBodies = map[*http.Request][]byte{}

// multipartRequest builds a multipart/form-data POST of n fields, then
// name=value.
func multipartRequest(n int, name, value string) *http.Request {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for i := range n {
		_ = w.WriteField(fmt.Sprintf("f%d", i), "1")
	}
	_ = w.WriteField(name, value)
	_ = w.Close()
	r := withType(rawRequest("POST", "/upload", nil), w.FormDataContentType())
	multipartBodies[r] = b.Bytes()
	return r
}

// TestMultipartWithoutDisk: file names and fields of a multipart body are
// inspected with no temporary file (Coraza's own parser would write one
// per file part; TMPDIR points nowhere here, so it could not).
func TestMultipartWithoutDisk(t *testing.T) {
	e := compileT(t, newCompilerT(t), refsAt(t, 1, "php-v33-stable", "lfi-v33-stable", "xss-v33-stable"), Options{})
	// Coraza checks at load that the temporary directory is writable; from
	// here on it is absent.
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "absent"))
	upload := func(field, filename, content string) (*http.Request, []byte) {
		var b bytes.Buffer
		w := multipart.NewWriter(&b)
		_ = w.WriteField("title", field)
		fw, _ := w.CreateFormFile("file", "x")
		_, _ = fw.Write([]byte(content))
		_ = w.Close()
		// CreateFormFile escapes the name; write the disposition by hand.
		body := bytes.Replace(b.Bytes(), []byte(`filename="x"`), []byte(`filename="`+filename+`"`), 1)
		return withType(rawRequest("POST", "/upload", nil), w.FormDataContentType()), body
	}
	cases := []struct {
		name, field, filename, content string
		set                            int
		want                           string
	}{
		{"PHP upload", "report", "shell.php", "<?php echo 1; ?>", 0, "owasp-crs-v030301-id933110-php"},
		{"path in a file name", "report", "../../../../etc/passwd", "x", 1, "owasp-crs-v030301-id930110-lfi"},
		{"XSS in a field", "<script>alert(1)</script>", "notes.txt", "hello", 2, "owasp-crs-v030301-id941100-xss"},
		{"ordinary upload", "Quarterly report", "report-q1.pdf", "%PDF-1.7 <script>", -1, ""},
	}
	for _, tc := range cases {
		r, body := upload(tc.field, tc.filename, tc.content)
		res := e.Evaluate(r, body)
		if res.Err != nil {
			t.Errorf("%s: %v", tc.name, res.Err)
		}
		for i := range res.Sets {
			if want := i == tc.set; res.Matched(i) != want || want && !containsString(res.Sets[i].IDs, tc.want) {
				t.Errorf("%s: set %d %+v; want matched %t with %s", tc.name, i, res.Sets[i], want, tc.want)
			}
		}
	}
}

// TestHostileInputsBounded: inputs built to make a WAF work hard (a
// megabyte of headers, tens of thousands of arguments, cookies or header
// lines, deep and wide JSON, one 8 KiB value) come back within
// generous bounds, cut where the Options say.
func TestHostileInputsBounded(t *testing.T) {
	e := compileT(t, newCompilerT(t), refsAt(t, 4, benchSets()...), Options{JSONParsing: true})
	many := http.Header{}
	for i := range 5000 {
		many.Add(fmt.Sprintf("X-H%d", i), "v")
	}
	cases := []struct {
		name       string
		r          *http.Request
		body       string
		head, args bool
	}{
		{"1 MiB header", rawRequest("GET", "/", http.Header{"X-Big": {strings.Repeat("x", 1<<20)}}), "", true, false},
		{"1 MiB target", rawRequest("GET", "/?a="+strings.Repeat("x", 1<<20), nil), "", true, false},
		{"20,000 query arguments", rawRequest("GET", "/?"+strings.Repeat("a=&", 20000), nil), "", true, true},
		{"5,000 query arguments", rawRequest("GET", "/?"+strings.Repeat("a=&", 5000), nil), "", false, true},
		{"5,000 header lines", rawRequest("GET", "/", many), "", true, false},
		{"12,000 cookies", rawRequest("GET", "/", http.Header{"Cookie": {strings.Repeat("a=b; ", 12000)}}), "", true, false},
		{"2,730 form arguments", withType(rawRequest("POST", "/", nil), "application/x-www-form-urlencoded"), strings.Repeat("a=&", 2730), false, true},
		{"8 KiB of [", withType(rawRequest("POST", "/", nil), "application/json"), strings.Repeat("[", 8192), false, false},
		{`1,638 nested {"a":`, withType(rawRequest("POST", "/", nil), "application/json"), strings.Repeat(`{"a":`, 1638), false, false},
		{"4,091 JSON numbers", withType(rawRequest("POST", "/", nil), "application/json"), "[" + strings.Repeat("1,", 4090) + "1]", false, true},
		{"one 8 KiB value", withType(rawRequest("POST", "/", nil), "application/x-www-form-urlencoded"), "a=" + strings.Repeat("x", 8190), false, false},
	}
	for _, tc := range cases {
		start := time.Now()
		res := e.Evaluate(tc.r, []byte(tc.body))
		took := time.Since(start)
		t.Logf("%-22s %v", tc.name, took.Round(time.Millisecond))
		if res.HeadTruncated != tc.head || res.ArgsTruncated != tc.args {
			t.Errorf("%s: head cut %t, arguments cut %t; want %t, %t", tc.name, res.HeadTruncated, res.ArgsTruncated, tc.head, tc.args)
		}
		if took > 20*time.Second {
			t.Errorf("%s took %v", tc.name, took)
		}
	}
}
