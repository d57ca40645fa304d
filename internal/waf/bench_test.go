package waf

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
)

// benchSets are the CRS 4.22 sets of a policy that turns every one on.
func benchSets() []string {
	var out []string
	for _, c := range crsVersions[0].cats {
		out = append(out, c+"-v422-stable")
	}
	return out
}

// smallGET is a browser's GET with a query and a cookie.
func smallGET() *http.Request {
	r := httptest.NewRequest("GET", "/products?category=shoes&size=42&sort=price_asc&page=2", nil)
	for i := 0; i < len(chromeHeaders); i += 2 {
		r.Header.Set(chromeHeaders[i], chromeHeaders[i+1])
	}
	return r
}

// post8K is a form POST of 8 KiB (64 fields of ordinary text).
func post8K() (*http.Request, []byte) {
	var b strings.Builder
	for i := 0; b.Len() < DefaultMaxBodyBytes; i++ {
		fmt.Fprintf(&b, "field%d=%s&", i, strings.Repeat("lorem+ipsum+dolor+sit+amet+", 4))
	}
	body := []byte(b.String()[:DefaultMaxBodyBytes])
	r := httptest.NewRequest("POST", "/checkout", nil)
	for i := 0; i < len(chromeHeaders); i += 2 {
		r.Header.Set(chromeHeaders[i], chromeHeaders[i+1])
	}
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.ContentLength = int64(len(body))
	return r, body
}

// cpuTime is the process's user and system CPU time in nanoseconds: on a
// shared machine it measures the work better than the wall clock.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkEvaluate measures one request through every CRS 4.22 set, and
// through sqli and xss alone, at sensitivity 1 and 4.
func BenchmarkEvaluate(b *testing.B) {
	c := newCompilerT(b)
	post, body := post8K()
	for _, sets := range []struct {
		name  string
		names []string
	}{{"all12", benchSets()}, {"sqli+xss", []string{"sqli-v422-stable", "xss-v422-stable"}}} {
		for _, s := range []int{1, 4} {
			e := compileT(b, c, refsAt(b, s, sets.names...), Options{})
			for _, req := range []struct {
				name string
				r    *http.Request
				body []byte
			}{{"GET", smallGET(), nil}, {"POST8K", post, body}} {
				b.Run(fmt.Sprintf("%s/sensitivity%d/%s", sets.name, s, req.name), func(b *testing.B) {
					b.ReportAllocs()
					cpu0 := cpuTime(b)
					for b.Loop() {
						if res := e.Evaluate(req.r, req.body); res.Matched(0) {
							b.Fatalf("matched: %+v", res)
						}
					}
					b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}
