package proxy_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// named starts n backends that answer with their own address and set a
// cookie of their own.
func named(t *testing.T, n int) ([]*backend, []string) {
	var bs []*backend
	var addrs []string
	for range n {
		var b *backend
		b = newBackend(t, func(w http.ResponseWriter, r *http.Request) {
			http.SetCookie(w, &http.Cookie{Name: "app", Value: "1"})
			w.Write([]byte(b.addr()))
		})
		bs = append(bs, b)
		addrs = append(addrs, b.addr())
	}
	return bs, addrs
}

// send issues GET / with extra headers and returns the response and the
// backend that answered.
func (l *lab) send(hdr map[string]string) (*http.Response, string) {
	l.t.Helper()
	req, _ := http.NewRequest("GET", l.url+"/", nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, body := l.do(req)
	if resp.StatusCode != 200 {
		l.t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	return resp, body
}

// setCookie returns the Set-Cookie value for name, "" when none.
func setCookie(resp *http.Response, name string) string {
	for _, c := range resp.Header["Set-Cookie"] {
		if strings.HasPrefix(c, name+"=") {
			return c
		}
	}
	return ""
}

func TestGeneratedCookieAffinity(t *testing.T) {
	_, addrs := named(t, 4)
	l := newLab(t, basic("  sessionAffinity: GENERATED_COOKIE\n  affinityCookieTtlSec: 300\n", "", addrs...), nil)
	seen := map[string]bool{}
	for c := range 12 {
		resp, first := l.send(nil)
		sc := setCookie(resp, "GCLB")
		if sc == "" || !strings.HasSuffix(sc, "; Path=/; Max-Age=300; HttpOnly") {
			t.Fatalf("Set-Cookie %q, want a GCLB cookie with Path=/, Max-Age=300", resp.Header["Set-Cookie"])
		}
		if setCookie(resp, "app") == "" {
			t.Fatalf("the backend's own cookie was lost: %q", resp.Header["Set-Cookie"])
		}
		cookie := strings.SplitN(sc, ";", 2)[0]
		seen[first] = true
		for range 15 {
			resp, got := l.send(map[string]string{"Cookie": "x=y; " + cookie})
			if got != first {
				t.Fatalf("client %d: %s then %s", c, first, got)
			}
			if setCookie(resp, "GCLB") != "" {
				t.Fatalf("cookie re-issued to a client that has one")
			}
		}
	}
	if len(seen) < 2 {
		t.Errorf("12 cookies all landed on %v", seen)
	}
}

func TestHTTPCookieAffinity(t *testing.T) {
	_, addrs := named(t, 3)
	l := newLab(t, basic("  sessionAffinity: HTTP_COOKIE\n  localityLbPolicy: RING_HASH\n"+
		"  consistentHash: {httpCookie: {name: sid, path: /app, ttl: {seconds: 5}}}\n", "", addrs...), nil)
	resp, _ := l.send(nil)
	if sc := setCookie(resp, "sid"); !strings.HasSuffix(sc, "; Path=/app; Max-Age=5; HttpOnly") {
		t.Fatalf("Set-Cookie %q", resp.Header["Set-Cookie"])
	}
	_, first := l.send(map[string]string{"Cookie": `sid="abc"`})
	for range 20 {
		if resp, got := l.send(map[string]string{"Cookie": "sid=abc"}); got != first || setCookie(resp, "sid") != "" {
			t.Fatalf("sid=abc: %s then %s (Set-Cookie %q)", first, got, resp.Header["Set-Cookie"])
		}
	}
}

func TestHeaderFieldAffinity(t *testing.T) {
	_, addrs := named(t, 4)
	l := newLab(t, basic("  sessionAffinity: HEADER_FIELD\n  consistentHash: {httpHeaderName: x-user}\n", "", addrs...), nil)
	seen := map[string]bool{}
	for _, user := range []string{"ann", "bob", "cat", "dan", "eve", "fay", "gus", "hal"} {
		_, first := l.send(map[string]string{"X-User": user})
		seen[first] = true
		for range 15 {
			if _, got := l.send(map[string]string{"x-user": user}); got != first {
				t.Fatalf("user %s: %s then %s", user, first, got)
			}
		}
	}
	if len(seen) < 2 {
		t.Errorf("8 users all landed on %v", seen)
	}
	// No header: no key, served anyway and without a cookie.
	if resp, _ := l.send(nil); len(resp.Header["Set-Cookie"]) != 1 {
		t.Errorf("Set-Cookie %q, want the backend's only", resp.Header["Set-Cookie"])
	}
}

func TestClientIPAffinity(t *testing.T) {
	_, addrs := named(t, 4)
	l := newLab(t, basic("  sessionAffinity: CLIENT_IP\n", "", addrs...), nil)
	// A new connection (and client port) per request: the port is not
	// part of the key.
	l.client.Transport.(*http.Transport).DisableKeepAlives = true
	_, first := l.send(nil)
	for range 30 {
		if _, got := l.send(nil); got != first {
			t.Fatalf("127.0.0.1: %s then %s", first, got)
		}
	}
}

func TestAffinityNeedsHashPolicy(t *testing.T) {
	_, addrs := named(t, 3)
	l := newLab(t, basic("  sessionAffinity: GENERATED_COOKIE\n  localityLbPolicy: ROUND_ROBIN\n", "", addrs...), nil)
	seen := map[string]bool{}
	for range 6 {
		resp, got := l.send(map[string]string{"Cookie": "GCLB=1"})
		seen[got] = true
		if setCookie(resp, "GCLB") != "" {
			t.Fatal("GCLB issued under ROUND_ROBIN")
		}
	}
	if len(seen) != 3 {
		t.Errorf("round robin with a cookie reached %d backends, want 3", len(seen))
	}
}

// TestInflightCounted: every policy counts the attempts in flight to an
// endpoint (LEAST_REQUEST picks by them; the dashboard shows them).
func TestInflightCounted(t *testing.T) {
	for _, policy := range []string{"LEAST_REQUEST", "ROUND_ROBIN", "RANDOM"} {
		t.Run(policy, func(t *testing.T) { testInflightCounted(t, policy) })
	}
}

func testInflightCounted(t *testing.T, policy string) {
	entered, release := make(chan struct{}), make(chan struct{})
	slow := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	})
	l := newLab(t, basic("  localityLbPolicy: "+policy+"\n", "", slow.addr()), nil)
	ep := l.plan.Endpoints[0]
	in := l.snap.Load().View.Inflight()
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := l.client.Get(l.url + "/")
		if err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("backend not reached")
	}
	if n := in.Load(ep); n != 1 {
		t.Errorf("%d in flight during the request, want 1", n)
	}
	close(release)
	<-done
	if n := in.Load(ep); n != 0 {
		t.Errorf("%d in flight after the request, want 0", n)
	}
}
