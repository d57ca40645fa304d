package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// benchLab is a proxy on 127.0.0.1 in front of one backend answering a
// 13-byte body, both served by real http.Servers.
func benchLab(b *testing.B, urlMap string) *lab {
	be := newBackend(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello, world\n")
	})
	return newLab(b, basic("", urlMap, be.addr()), nil)
}

func runBench(b *testing.B, l *lab) {
	b.Run("serial", func(b *testing.B) {
		req, _ := http.NewRequest("GET", l.url+"/bench?x=1", nil)
		b.ReportAllocs()
		for b.Loop() {
			resp, err := l.client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			req, _ := http.NewRequest("GET", l.url+"/bench?x=1", nil)
			for pb.Next() {
				resp, err := l.client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	})
	// handler: the proxy handler alone (in-memory client side, real
	// backend), so allocs/op is the proxy's own cost including its
	// transport.
	b.Run("handler", func(b *testing.B) { benchHandler(b, l, 1) })
	// handler-h2: the same for a request as net/http's HTTP/2 server
	// hands it over (the :method, :path and :authority checks run).
	b.Run("handler-h2", func(b *testing.B) { benchHandler(b, l, 2) })
}

// benchHandler runs the proxy handler alone on a GET of protocol major
// version major.
func benchHandler(b *testing.B, l *lab, major int) {
	h := l.srv.Handler
	req := httptest.NewRequest("GET", "http://example.com/bench?x=1", nil)
	req.Header.Set("User-Agent", "bench")
	req.Header.Set("Accept", "*/*")
	if major == 2 {
		// As net/http's HTTP/2 server sets them: RequestURI is :path.
		req.Proto, req.ProtoMajor, req.ProtoMinor, req.RequestURI = "HTTP/2.0", 2, 0, "/bench?x=1"
	}
	b.ReportAllocs()
	for b.Loop() {
		w := &discardWriter{h: http.Header{}}
		h.ServeHTTP(w, req)
		if w.code != 200 {
			b.Fatalf("status %d", w.code)
		}
	}
}

func BenchmarkProxy(b *testing.B) {
	runBench(b, benchLab(b, ""))
}

func BenchmarkProxyRetryPolicy(b *testing.B) {
	um := "  defaultRouteAction:\n    weightedBackendServices: [{backendService: bs, weight: 1}]\n" +
		"    retryPolicy:\n      retryConditions: [5xx, gateway-error, connect-failure]\n      numRetries: 2\n      perTryTimeout: {seconds: 5}\n"
	runBench(b, benchLab(b, um))
}

// discardWriter is a minimal http.ResponseWriter for the handler benchmark.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(c int)   { w.code = c }
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = 200
	}
	return len(p), nil
}

// BenchmarkProxyPost: a POST with a 13-byte body through the proxy
// handler alone (in-memory client side, real backend), i.e. the fast
// transport's fallback (net/http's Transport from NewTransport).
func BenchmarkProxyPost(b *testing.B) {
	h := benchLab(b, "").srv.Handler
	body := &rewindBody{}
	req := httptest.NewRequest("POST", "http://example.com/bench?x=1", nil)
	req.Header.Set("User-Agent", "bench")
	req.Header.Set("Content-Type", "text/plain")
	req.Body, req.ContentLength = body, 13
	b.ReportAllocs()
	for b.Loop() {
		body.Reset("hello, world\n")
		w := &discardWriter{h: http.Header{}}
		h.ServeHTTP(w, req)
		if w.code != 200 {
			b.Fatalf("status %d", w.code)
		}
	}
}

// rewindBody is a request body that can be refilled.
type rewindBody struct{ strings.Reader }

func (*rewindBody) Close() error { return nil }

// BenchmarkProxyPostArmor is BenchmarkProxyPost with a backend security
// policy: "plain" has source-range and expression rules only, so the
// body is not read before the backend is picked; "waf" calls the
// preconfigured WAF (sqli at sensitivity 1), which reads the 13-byte
// body first.
func BenchmarkProxyPostArmor(b *testing.B) {
	be := newBackend(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello, world\n")
	})
	for _, bc := range []struct{ name, policies string }{{"plain", plainPolicy}, {"waf", wafPolicy}} {
		b.Run(bc.name, func(b *testing.B) {
			h := armorLab(b, labServer{}, 30, "", bc.policies, be.addr()).srv.Handler
			body := &rewindBody{}
			req := httptest.NewRequest("POST", "http://example.com/bench?x=1", nil)
			req.Header.Set("User-Agent", "bench")
			req.Header.Set("Content-Type", "text/plain")
			b.ReportAllocs()
			for b.Loop() {
				body.Reset("hello, world\n")
				req.Body, req.ContentLength = body, 13
				w := &discardWriter{h: http.Header{}}
				h.ServeHTTP(w, req)
				if w.code != 200 {
					b.Fatalf("status %d", w.code)
				}
			}
		})
	}
}

// BenchmarkProxyArmor is the proxy handler's GET (as in BenchmarkProxy's
// handler) behind no policy, behind a policy with the default rule
// only, and behind one of 10 source-range and 10 expression rules that
// the request goes through without a match (armor's BenchmarkEvaluate
// policy): the cost of attaching a policy and of 20 rules per request.
func BenchmarkProxyArmor(b *testing.B) {
	be := newBackend(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello, world\n")
	})
	var rules strings.Builder
	rules.WriteString("securityPolicies:\n- name: waf\n  rules:\n")
	for i := range 10 {
		fmt.Fprintf(&rules, "  - {priority: %d, action: deny(403), match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['198.51.%d.0/24', '2001:db8:%x::/48']}}}\n", 10+i, i, i)
	}
	for i, e := range []string{
		"request.path.startsWith('/admin')", "request.headers['user-agent'].lower().contains('sqlmap')",
		"request.method == 'TRACE'", "inIpRange(origin.ip, '203.0.113.0/24')", "request.query.contains('union select')",
		"request.headers['x-forwarded-host'] == 'evil.example'", "request.path.matches('.*[.]php$')",
		"origin.region_code == 'ZZ'", "request.headers['referer'].contains('spam.example')",
		"request.scheme == 'http' && request.path == '/login'",
	} {
		fmt.Fprintf(&rules, "  - {priority: %d, action: deny(403), match: {expr: {expression: \"%s\"}}}\n", 100+i, e)
	}
	rules.WriteString("  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}\n")
	const allowOnly = "securityPolicies:\n- name: waf\n  rules:\n  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}\n"
	// cpu-µs/op is the process's CPU time (proxy and backend) per request:
	// steadier than the wall clock on a shared machine.
	withCPU := func(b *testing.B, l *lab) {
		cpu0 := cpuTime()
		benchHandler(b, l, 1)
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
	}
	b.Run("none", func(b *testing.B) { withCPU(b, newLab(b, basic("", "", be.addr()), nil)) })
	b.Run("default-rule", func(b *testing.B) { withCPU(b, armorLab(b, labServer{}, 30, "", allowOnly, be.addr())) })
	b.Run("20-rules", func(b *testing.B) { withCPU(b, armorLab(b, labServer{}, 30, "", rules.String(), be.addr())) })
}
