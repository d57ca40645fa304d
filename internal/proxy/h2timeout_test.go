package proxy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// HTTP/2 header and idle timeouts (issue 17, defect 3): an HTTP/2
// connection gets ReadHeaderTimeout for its first complete header block
// and for every header block it opens, and IdleTimeout between streams,
// on both server loops and both HTTP/2 entry points.

const (
	// h2TestHeaderTimeout is the labs' ReadHeaderTimeout here.
	h2TestHeaderTimeout = 500 * time.Millisecond
	// h2CloseWait is how long a test waits for a connection the server
	// should close (generous: the machine is shared).
	h2CloseWait = 10 * time.Second
	// h2Trickle is the gap between the bytes or frames a slow client
	// sends, well within h2TestHeaderTimeout.
	h2Trickle = 100 * time.Millisecond
)

// h2Loops are the server loops: h1.Server handing HTTP/2 to NewServer's
// http.Server, and that http.Server alone (the NET_HTTP option).
var h2Loops = []struct {
	name    string
	netHTTP bool
}{{"h1", false}, {"NET_HTTP", true}}

// forH2Entries runs f in parallel subtests for each server loop and
// HTTP/2 entry point.
func forH2Entries(t *testing.T, f func(t *testing.T, netHTTP bool, e h2Entry)) {
	for _, loop := range h2Loops {
		for _, e := range h2Entries {
			t.Run(loop.name+"/"+e.name, func(t *testing.T) {
				t.Parallel()
				f(t, loop.netHTTP, e)
			})
		}
	}
}

// h2TimeoutLab is a lab in front of one backend answering "ok", with
// the given server settings, TLS for e.tls.
func h2TimeoutLab(t *testing.T, e h2Entry, ls labServer) *lab {
	t.Helper()
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	ls.h2 = e.h2
	return newLabServer(t, basic("", "", be.addr()), e.tlsConfig(t), ls)
}

// closeWatch reads and discards the server's frames in the background
// until the connection closes. Start it after the test's last response.
type closeWatch struct {
	done   chan struct{}
	goAway atomic.Bool // a GOAWAY came before the close
}

func (h *h2conn) watchClose() *closeWatch {
	w := &closeWatch{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			f, err := h.fr.ReadFrame()
			if err != nil {
				return
			}
			if _, ok := f.(*http2.GoAwayFrame); ok {
				w.goAway.Store(true)
			}
		}
	}()
	return w
}

// closedWithin fails the test unless the connection closes within d.
func (w *closeWatch) closedWithin(t *testing.T, d time.Duration, what string) {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(d):
		t.Fatalf("%s: the connection is still open after %v", what, d)
	}
}

// openFor fails the test if the connection closes within d.
func (w *closeWatch) openFor(t *testing.T, d time.Duration, what string) {
	t.Helper()
	select {
	case <-w.done:
		t.Fatalf("%s: the connection closed within %v", what, d)
	case <-time.After(d):
	}
}

// okGet sends a GET and fails the test unless it is answered 200 "ok".
func (h *h2conn) okGet(t *testing.T) {
	t.Helper()
	id := h.get("GET", "example.com", "/")
	if r := h.mustResponse(id); r.status != 200 || string(r.body) != "ok" {
		t.Fatalf("GET: %v %q, want 200 ok", r, r.body)
	}
}

// trickle calls send every h2Trickle in the background until it fails,
// the connection closes (w) or the test ends.
func trickle(t *testing.T, w *closeWatch, send func() error) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		tk := time.NewTicker(h2Trickle)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-w.done:
				return
			case <-tk.C:
				if send() != nil {
					return
				}
			}
		}
	}()
}

// openBlock sends a HEADERS frame for a GET without END_HEADERS: a
// header block the client leaves open.
func (h *h2conn) openBlock(t *testing.T) uint32 {
	t.Helper()
	id := h.next
	h.next += 2
	frag := h.block(":method", "GET", ":scheme", "http", ":authority", "example.com", ":path", "/")
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndStream: true}); err != nil {
		t.Fatal(err)
	}
	return id
}

// trickleContinuations leaves a header block open and sends an empty
// CONTINUATION frame (without END_HEADERS) every h2Trickle.
func (h *h2conn) trickleContinuations(t *testing.T, w *closeWatch) {
	t.Helper()
	id := h.openBlock(t)
	trickle(t, w, func() error { return h.fr.WriteContinuation(id, false, nil) })
}

// trickleHeadersPayload sends the frame header of a complete HEADERS
// frame (END_HEADERS, END_STREAM) and then its payload one byte every
// h2Trickle.
func (h *h2conn) trickleHeadersPayload(t *testing.T, w *closeWatch) {
	t.Helper()
	id := h.next
	h.next += 2
	frag := h.block(":method", "GET", ":scheme", "http", ":authority", "example.com", ":path", "/", "x-pad", strings.Repeat("p", 200))
	var hdr [9]byte
	hdr[0], hdr[1], hdr[2] = byte(len(frag)>>16), byte(len(frag)>>8), byte(len(frag))
	hdr[3] = byte(http2.FrameHeaders)
	hdr[4] = byte(http2.FlagHeadersEndHeaders | http2.FlagHeadersEndStream)
	binary.BigEndian.PutUint32(hdr[5:], id)
	if _, err := h.c.Write(hdr[:]); err != nil {
		t.Fatal(err)
	}
	trickle(t, w, func() error {
		if len(frag) == 0 {
			return io.EOF
		}
		_, err := h.c.Write(frag[:1])
		frag = frag[1:]
		return err
	})
}

// A client slow with a header block, before or after a complete
// request, is closed after the header timeout (HTTP/1.1: 30 s); it was
// held for the idle timeout (610 s).
func TestH2HeaderTimeout(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		request   bool // complete a request first, then wait past the first-request deadline
		slowBlock func(h *h2conn, t *testing.T, w *closeWatch)
	}{
		{"preface only", false, func(*h2conn, *testing.T, *closeWatch) {}},
		{"CONTINUATION trickle", false, (*h2conn).trickleContinuations},
		{"HEADERS payload trickle", false, (*h2conn).trickleHeadersPayload},
		{"request then open block stalls", true, func(h *h2conn, t *testing.T, _ *closeWatch) { h.openBlock(t) }},
		{"request then CONTINUATION trickle", true, (*h2conn).trickleContinuations},
		{"request then HEADERS payload trickle", true, (*h2conn).trickleHeadersPayload},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forH2Entries(t, func(t *testing.T, netHTTP bool, e h2Entry) {
				l := h2TimeoutLab(t, e, labServer{netHTTP: netHTTP, headerTimeout: h2TestHeaderTimeout, idleTimeout: time.Minute})
				h := dialH2(t, l.addr, e.tls)
				if tc.request {
					h.okGet(t)
					time.Sleep(2 * h2TestHeaderTimeout)
				}
				w := h.watchClose()
				tc.slowBlock(h, t, w)
				w.closedWithin(t, h2CloseWait, tc.name)
			})
		})
	}
}

// Between streams the idle timeout governs, not the header timeout: a
// client making requests with gaps longer than the header timeout keeps
// its connection, which the idle timeout then closes with GOAWAY.
func TestH2IdleBetweenStreams(t *testing.T) {
	t.Parallel()
	forH2Entries(t, func(t *testing.T, netHTTP bool, e h2Entry) {
		l := h2TimeoutLab(t, e, labServer{netHTTP: netHTTP, headerTimeout: h2TestHeaderTimeout, idleTimeout: 3 * time.Second})
		h := dialH2(t, l.addr, e.tls)
		for range 4 {
			h.okGet(t)
			time.Sleep(h2TestHeaderTimeout / 2)
		}
		time.Sleep(3 * h2TestHeaderTimeout)
		h.okGet(t)
		w := h.watchClose()
		w.openFor(t, 3*h2TestHeaderTimeout, "idle after a request")
		w.closedWithin(t, h2CloseWait, "idle past the idle timeout")
		if !w.goAway.Load() {
			t.Error("the idle connection closed without GOAWAY (not by the idle timeout)")
		}
	})
}

// With a connection limit of N, N HTTP/2 connections that only sent the
// preface lock other clients out for the header timeout, not for the
// idle timeout.
func TestH2PrefaceOnlyConnectionsReleaseLimit(t *testing.T) {
	t.Parallel()
	const limit = 3
	forH2Entries(t, func(t *testing.T, netHTTP bool, e h2Entry) {
		l := h2TimeoutLab(t, e, labServer{netHTTP: netHTTP, headerTimeout: h2TestHeaderTimeout, idleTimeout: time.Minute, maxConns: limit})
		for range limit {
			dialH2(t, l.addr, e.tls)
		}
		ctx, cancel := context.WithTimeout(context.Background(), h2CloseWait)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", l.url+"/", nil)
		resp, err := l.client.Do(req)
		if err != nil {
			t.Fatalf("a client after %d preface-only HTTP/2 connections: %v", limit, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("got %d %q, want 200 ok", resp.StatusCode, b)
		}
	})
}

// Shutdown sends GOAWAY to HTTP/2 connections and closes them; Close
// closes them at once.
func TestH2ShutdownAndClose(t *testing.T) {
	t.Parallel()
	for _, shutdown := range []bool{true, false} {
		name := "Close"
		if shutdown {
			name = "Shutdown"
		}
		t.Run(name, func(t *testing.T) {
			forH2Entries(t, func(t *testing.T, netHTTP bool, e h2Entry) {
				l := h2TimeoutLab(t, e, labServer{netHTTP: netHTTP})
				h := dialH2(t, l.addr, e.tls)
				h.okGet(t)
				w := h.watchClose()
				errc := make(chan error, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), h2CloseWait)
					defer cancel()
					switch {
					case !shutdown && l.h1 != nil:
						errc <- l.h1.Close()
					case !shutdown:
						errc <- l.srv.Close()
					case l.h1 != nil:
						errc <- l.h1.Shutdown(ctx)
					default:
						errc <- l.srv.Shutdown(ctx)
					}
				}()
				w.closedWithin(t, h2CloseWait, name)
				if shutdown && !w.goAway.Load() {
					t.Error("Shutdown closed the connection without GOAWAY")
				}
				select {
				case err := <-errc:
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
				case <-time.After(h2CloseWait):
					t.Fatalf("%s did not return within %v", name, h2CloseWait)
				}
			})
		})
	}
}

// Connections closed by the header timeout leave no goroutines behind.
func TestH2HeaderTimeoutNoLeak(t *testing.T) {
	for _, loop := range h2Loops {
		t.Run(loop.name, func(t *testing.T) {
			labs := map[bool]*lab{}
			for _, e := range h2Entries {
				l := h2TimeoutLab(t, e, labServer{netHTTP: loop.netHTTP, headerTimeout: h2TestHeaderTimeout, idleTimeout: time.Minute})
				labs[e.tls] = l
				h := dialH2(t, l.addr, e.tls) // starts the HTTP/2 server
				h.okGet(t)
				h.c.Close()
			}
			base := settledGoroutines()
			var ws []*closeWatch
			for i := range 12 {
				e := h2Entries[i%len(h2Entries)]
				h := dialH2(t, labs[e.tls].addr, e.tls)
				if i%3 == 1 {
					h.okGet(t)
					h.openBlock(t)
				}
				w := h.watchClose()
				if i%3 == 2 {
					h.trickleContinuations(t, w)
				}
				ws = append(ws, w)
			}
			for _, w := range ws {
				w.closedWithin(t, h2CloseWait, "slow client")
			}
			deadline := time.Now().Add(30 * time.Second)
			for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > base {
				buf := make([]byte, 1<<20)
				t.Fatalf("goroutines: %d, want at most %d as before the slow clients\n%s", n, base, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}

// settledGoroutines returns the goroutine count once it stops falling
// (connections closed just before end their goroutines).
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 20 {
		time.Sleep(100 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m >= n {
			return n
		}
		n = m
	}
	return n
}

// The watched HTTP/2 connection shows TLS to the server and the handler
// over TLS, and nothing over cleartext: TLS variables reach the backend
// only over h2, and a TLS 1.2 cipher suite HTTP/2 prohibits (RFC 9113
// §9.2.2) gets the connection refused with INADEQUATE_SECURITY.
func TestH2WatchKeepsTLSState(t *testing.T) {
	t.Parallel()
	forH2Entries(t, func(t *testing.T, netHTTP bool, e h2Entry) {
		be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, r.Header.Get("X-Enc")+","+r.Header.Get("X-Proto")+","+r.Header.Get("X-TLS"))
		})
		var tlsCfg *tls.Config
		want := "false,HTTP/2,"
		if e.tls {
			tlsCfg, want = selfSigned(t), "true,HTTP/2,TLSv1.3"
		}
		bs := `  customRequestHeaders: ["X-Enc: {client_encrypted}", "X-Proto: {client_protocol}", "X-TLS: {tls_version}"]` + "\n"
		l := newLabServer(t, basic(bs, "", be.addr()), tlsCfg, labServer{netHTTP: netHTTP, h2: e.h2})
		h := dialH2(t, l.addr, e.tls)
		if r := h.mustResponse(h.get("GET", "example.com", "/")); r.status != 200 || string(r.body) != want {
			t.Fatalf("got %v %q, want 200 %q", r, r.body, want)
		}
		if !e.tls {
			return
		}
		// Over TLS, HTTP/2 needs ALPN h2 (RFC 9113 §3.2): a client
		// that negotiated no protocol, or http/1.1, and sends the
		// preface is not served HTTP/2 (the h1 loop served it, without
		// its TLS state), on either loop.
		for _, alpn := range [][]string{nil, {"http/1.1"}} {
			tc, err := tls.Dial("tcp", l.addr, &tls.Config{InsecureSkipVerify: true, NextProtos: alpn}) //nolint:gosec // the test's own certificate
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(tc, http2.ClientPreface)
			tc.SetReadDeadline(time.Now().Add(h2CloseWait))
			got, _ := io.ReadAll(tc)
			tc.Close()
			if !bytes.HasPrefix(got, []byte("HTTP/1.")) {
				t.Errorf("ALPN %q, then the preface: got %q, want an HTTP/1.1 answer", alpn, got)
			}
		}
		c, err := tls.Dial("tcp", l.addr, &tls.Config{
			InsecureSkipVerify: true, NextProtos: []string{"h2"}, //nolint:gosec // the test's own certificate
			MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, http2.ClientPreface)
		fr := http2.NewFramer(c, c)
		fr.WriteSettings()
		c.SetReadDeadline(time.Now().Add(h2CloseWait))
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("no GOAWAY INADEQUATE_SECURITY for a prohibited cipher suite: %v", err)
			}
			if g, ok := f.(*http2.GoAwayFrame); ok {
				if g.ErrCode != http2.ErrCodeInadequateSecurity {
					t.Fatalf("GOAWAY %v, want INADEQUATE_SECURITY", g.ErrCode)
				}
				return
			}
		}
	})
}
