package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestH2RequestValidation: an HTTP/2 request whose pseudo-header fields
// would not survive the trip to an HTTP/1.1 backend (a :method that is
// not a token, a :path that is not origin-form or carries whitespace or
// control bytes, an :authority that is not a valid Host) is the client's
// mistake: 400 before routing, no backend attempt, nothing for outlier
// detection or passive health. Over HTTP/1.1 the same requests get 400
// from the request parser.
func TestH2RequestValidation(t *testing.T) {
	t.Parallel()
	type fields = []string
	cases := []struct {
		name   string
		fields fields
	}{
		{"method with space", fields{":method", "PO ST", ":scheme", "http", ":authority", "a.example", ":path", "/"}},
		{"method with request line", fields{":method", "GET /admin HTTP/1.1", ":scheme", "http", ":authority", "a.example", ":path", "/public"}},
		{"method with NUL", fields{":method", "G\x00T", ":scheme", "http", ":authority", "a.example", ":path", "/"}},
		{"method with slash", fields{":method", "GET/", ":scheme", "http", ":authority", "a.example", ":path", "/"}},
		{"path with space", fields{":method", "GET", ":scheme", "http", ":authority", "a.example", ":path", "/x?a b"}},
		{"path with tab", fields{":method", "GET", ":scheme", "http", ":authority", "a.example", ":path", "/x\ty"}},
		{"path with DEL", fields{":method", "GET", ":scheme", "http", ":authority", "a.example", ":path", "/x\x7f"}},
		{"path not origin-form", fields{":method", "GET", ":scheme", "http", ":authority", "a.example", ":path", "x/y"}},
		{"path asterisk on GET", fields{":method", "GET", ":scheme", "http", ":authority", "a.example", ":path", "*"}},
		{"path absolute-form", fields{":method", "GET", ":scheme", "http", ":authority", "a.example", ":path", "http://b.example/"}},
		{"authority with quote", fields{":method", "GET", ":scheme", "http", ":authority", `pub"lic.example.com`, ":path", "/"}},
		{"authority with space", fields{":method", "GET", ":scheme", "http", ":authority", "a b", ":path", "/"}},
		{"authority with slash", fields{":method", "GET", ":scheme", "http", ":authority", "a/x", ":path", "/"}},
		{"authority not ASCII", fields{":method", "GET", ":scheme", "http", ":authority", "é.example.com", ":path", "/"}},
		{"authority with userinfo", fields{":method", "GET", ":scheme", "http", ":authority", "u@a.example", ":path", "/"}},
		{"scheme with space", fields{":method", "GET", ":scheme", "ht tp", ":authority", "a.example", ":path", "/"}},
		{"host disagrees with authority", fields{":method", "GET", ":scheme", "http", ":authority", "a.example", ":path", "/", "host", "b.example"}},
	}
	forH2Entries(t, func(t *testing.T, netHTTP bool, e h2Entry) {
		{
			b := newBackend(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
			l := newLabServer(t, basic("", "", b.addr()), e.tlsConfig(t), labServer{netHTTP: netHTTP, h2: e.h2})
			c := dialH2(t, l.addr, e.tls)
			for _, tc := range cases {
				r, err := c.response(c.request(nil, tc.fields...))
				if err != nil {
					// The server may close the connection on a field it
					// takes as a protocol error: reconnect and go on.
					c = dialH2(t, l.addr, e.tls)
					continue
				}
				if r.reset == 0 && !r.goAway && r.status != http.StatusBadRequest {
					t.Errorf("%s: got %v, want 400 (or a stream/connection error)", tc.name, r)
				}
			}
			if n := b.hits.Load(); n != 0 {
				t.Errorf("the backend got %d requests, want 0", n)
			}
			for _, o := range l.observed() {
				if o.BackendSignal() {
					t.Errorf("an attempt counted against the backend: status %d err %v", o.Status, o.Err)
				}
			}
			// A good request on the same kind of connection still works.
			c = dialH2(t, l.addr, e.tls)
			r := c.mustResponse(c.get("GET", "a.example", "/ok"))
			if r.status != 200 || !strings.Contains(string(r.body), "ok") {
				t.Errorf("good request: %v %q", r, r.body)
			}
		}
	})
}

// TestTransportRefusalIsClientFault: a request that reaches the exchange
// and that the backend transport refuses because of what it holds (here
// a method with a request line in it, handed to the handler directly as
// an HTTP/1.1 request so that the HTTP/2 checks do not stop it first) is
// the request's fault: 400 invalid_request, not 503, nothing sent to the
// backend, no outcome that outlier detection or passive health would
// count. Before issue 17 it was a gateway failure (503
// backend_connection_closed_before_data_sent_to_client on the fallback
// transport, the request line rewritten on the fast one), and five of
// them ejected the only endpoint.
func TestTransportRefusalIsClientFault(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string // a body takes the fallback transport
		bsExtra string
	}{{"fast path", "", ""}, {"fallback", "data", ""}, {"HTTP/2 transport", "", "  protocol: H2C\n"}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
			l := newLab(t, basic(tc.bsExtra, "", b.addr()), nil)
			h := l.srv.Handler
			for range 5 {
				r := httptest.NewRequest("GET", "http://a.example/public", strings.NewReader(tc.body))
				r.Method = "GET /admin HTTP/1.1"
				if tc.body == "" {
					r.Body, r.ContentLength = http.NoBody, 0
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusBadRequest || w.Header().Get("X-Spillway-Status-Details") != "invalid_request" {
					t.Fatalf("got %d %q, want 400 invalid_request", w.Code, w.Header().Get("X-Spillway-Status-Details"))
				}
			}
			if n := b.hits.Load(); n != 0 {
				t.Errorf("the backend got %d requests, want 0", n)
			}
			for _, o := range l.observed() {
				if o.BackendSignal() {
					t.Errorf("an attempt counted against the backend: status %d err %v", o.Status, o.Err)
				}
			}
		})
	}
}
