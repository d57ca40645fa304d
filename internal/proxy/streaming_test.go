package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/proxy"
)

func TestStreamingResponseArrivesChunkByChunk(t *testing.T) {
	release := make(chan struct{})
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
		io.WriteString(w, "second\n")
	})
	l := newLab(t, basic("", "", be.addr()), nil)
	resp, err := l.client.Get(l.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first chunk %q, %v", line, err)
	}
	close(release) // the backend only finishes after the client saw chunk 1
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "second\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}
}

func TestServerSentEventsAreFlushed(t *testing.T) {
	release := make(chan struct{})
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Length", "22")
		io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
		io.WriteString(w, "data: 22\n\n\n\n\n")
	})
	l := newLab(t, basic("", "", be.addr()), nil)
	resp, err := l.client.Get(l.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 9)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "data: 1\n\n" {
		t.Fatalf("first event %q, %v", buf, err)
	}
	close(release)
	io.Copy(io.Discard, resp.Body)
}

func TestLargeRequestBodyIsStreamedAndEchoed(t *testing.T) {
	t.Parallel()
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		// Without full duplex net/http stops reading a request body
		// 256 KiB after the response has started.
		http.NewResponseController(w).EnableFullDuplex()
		io.Copy(w, r.Body)
	})
	l := newLab(t, basic("", "", be.addr()), nil)
	payload := make([]byte, 8<<20)
	rand.Read(payload)
	for _, chunked := range []bool{false, true} {
		var body io.Reader = bytes.NewReader(payload)
		if chunked {
			body = struct{ io.Reader }{body} // unknown length: chunked
		}
		req, _ := http.NewRequest("POST", l.url+"/echo", body)
		resp, got := l.do(req)
		if resp.StatusCode != 200 || got != string(payload) {
			t.Errorf("chunked=%v: status %d, echoed %d bytes, want %d identical", chunked, resp.StatusCode, len(got), len(payload))
		}
	}
}

func TestRequestBodyStreamsFullDuplex(t *testing.T) {
	// The backend echoes each line as it arrives; the client sends the
	// second line only after reading the first echo, which works only if
	// neither the request nor the response is buffered.
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		br := bufio.NewReader(r.Body)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				io.WriteString(w, "echo "+line)
				w.(http.Flusher).Flush()
			}
			if err != nil {
				return
			}
		}
	})
	l := newLab(t, basic("", "", be.addr()), nil)
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", l.url+"/duplex", pr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req = req.WithContext(ctx)
	go io.WriteString(pw, "one\n")
	resp, err := l.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "echo one\n" {
		t.Fatalf("first echo %q, %v", line, err)
	}
	io.WriteString(pw, "two\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo two\n" {
		t.Fatalf("second echo %q, %v", line, err)
	}
	pw.Close()
}

func TestTrailersAreForwarded(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		io.WriteString(w, "body")
		w.Header().Set("X-Checksum", "abc")
	})
	l := newLab(t, basic("", "", be.addr()), nil)
	resp, err := l.client.Get(l.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if got := resp.Trailer.Get("X-Checksum"); got != "abc" {
		t.Errorf("trailer X-Checksum = %q, want abc", got)
	}
}

// wsBackend answers an upgrade with 101 and echoes bytes over the
// hijacked connection.
func wsBackend(t *testing.T) *backend {
	return newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" || !strings.EqualFold(r.Header.Get("Connection"), "upgrade") {
			http.Error(w, "not an upgrade: "+r.Header.Get("Connection"), 400)
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Backend: ws\r\n\r\n")
		io.Copy(c, brw)
	})
}

// dialUpgrade opens a raw connection through the proxy and upgrades it.
func dialUpgrade(t *testing.T, l *lab) (net.Conn, *bufio.Reader) {
	t.Helper()
	var c net.Conn
	var err error
	if strings.HasPrefix(l.url, "https:") {
		c, err = tls.Dial("tcp", l.addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	} else {
		c, err = net.Dial("tcp", l.addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 || resp.Header.Get("X-Backend") != "ws" || resp.Header.Get("Upgrade") != "websocket" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("upgrade answer %d %v %q", resp.StatusCode, resp.Header, b)
	}
	return c, br
}

func echoOnce(t *testing.T, c net.Conn, br *bufio.Reader, msg string) {
	t.Helper()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != msg {
		t.Fatalf("echo %q, %v; want %q", got, err, msg)
	}
}

func TestWebSocketUpgrade(t *testing.T) {
	be := wsBackend(t)
	l := newLab(t, basic("", "", be.addr()), nil)
	c, br := dialUpgrade(t, l)
	echoOnce(t, c, br, "hello")
	echoOnce(t, c, br, strings.Repeat("x", 100<<10))
}

// The same through an HTTPS frontend: the upgraded connection is the TLS
// one.
func TestWebSocketUpgradeOverTLS(t *testing.T) {
	be := wsBackend(t)
	yaml := strings.Replace(basic("", "", be.addr()), "region: us-east1\n", "region: us-east1\n  protocol: HTTPS\n  certificates: [{certificateFile: c.pem, privateKeyFile: k.pem}]\n", 1)
	l := newLab(t, yaml, selfSigned(t))
	c, br := dialUpgrade(t, l)
	echoOnce(t, c, br, "hello")
	echoOnce(t, c, br, strings.Repeat("x", 100<<10))
}

func TestWebSocketIdleTimeout(t *testing.T) {
	t.Parallel()
	be := wsBackend(t)
	l := newLab(t, basic("  timeoutSec: 1\n", "", be.addr()), nil)
	c, br := dialUpgrade(t, l)
	// Active for longer than the timeout: stays open.
	for range 4 {
		time.Sleep(300 * time.Millisecond)
		echoOnce(t, c, br, "ping")
	}
	// Idle for longer than the timeout: closed.
	start := time.Now()
	_, err := br.ReadByte()
	if err == nil {
		t.Fatal("read a byte from an idle tunnel")
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("idle tunnel closed after %v, want about 1s (under 10 s: not a default timeout)", el)
	}
}

func TestH2CThroughNewServer(t *testing.T) {
	forH2Servers(t, testH2CThroughNewServer)
}

func testH2CThroughNewServer(t *testing.T, h2s proxy.HTTP2Server) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "via h2c") })
	l := newLabServer(t, basic("", "", be.addr()), nil, labServer{netHTTP: os.Getenv("SPILLWAY_TEST_HTTP1_SERVER") == "NET_HTTP", h2: h2s})
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(l.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || string(b) != "via h2c" {
		t.Errorf("got %s %d %q, want HTTP/2.0 200 %q", resp.Proto, resp.StatusCode, b, "via h2c")
	}
}

func TestTLSFrontendNegotiatesH2(t *testing.T) {
	forH2Servers(t, testTLSFrontendNegotiatesH2)
}

func testTLSFrontendNegotiatesH2(t *testing.T, h2s proxy.HTTP2Server) {
	be := newBackend(t, echoHeaders)
	yaml := strings.Replace(basic("", "", be.addr()), "region: us-east1\n", "region: us-east1\n  protocol: HTTPS\n  certificates: [{certificateFile: c.pem, privateKeyFile: k.pem}]\n", 1)
	l := newLabServer(t, yaml, selfSigned(t), labServer{netHTTP: os.Getenv("SPILLWAY_TEST_HTTP1_SERVER") == "NET_HTTP", h2: h2s})
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(l.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h2" {
		t.Fatalf("got %s %d, want HTTP/2.0 200 over TLS h2", resp.Proto, resp.StatusCode)
	}
	if e := decodeEcho(t, string(b)); e.Header.Get("X-Forwarded-Proto") != "https" {
		t.Errorf("X-Forwarded-Proto = %q, want https", e.Header.Get("X-Forwarded-Proto"))
	}
	// HTTP/1.1 clients still work.
	resp2, _ := newLabClient11(l).Get(l.url + "/")
	if resp2 == nil || resp2.ProtoMajor != 1 || resp2.StatusCode != 200 {
		t.Errorf("HTTP/1.1 over TLS: %v", resp2)
	} else {
		resp2.Body.Close()
	}
}

func newLabClient11(l *lab) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	l.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func TestHTTPSAndHTTP2Backends(t *testing.T) {
	for _, proto := range []string{"HTTPS", "HTTP2", "H2C"} {
		t.Run(proto, func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tlsOn := "plain"
				if r.TLS != nil {
					tlsOn = "tls"
				}
				io.WriteString(w, r.Proto+" "+tlsOn)
			})
			srv := httptest.NewUnstartedServer(h)
			var want string
			switch proto {
			case "HTTPS":
				srv.StartTLS()
				want = "HTTP/1.1 tls"
			case "HTTP2":
				srv.EnableHTTP2 = true
				srv.StartTLS()
				want = "HTTP/2.0 tls"
			case "H2C":
				var p http.Protocols
				p.SetUnencryptedHTTP2(true)
				srv.Config.Protocols = &p
				srv.Start()
				want = "HTTP/2.0 plain"
			}
			t.Cleanup(srv.Close)
			l := newLab(t, basic("  protocol: "+proto+"\n", "", srv.Listener.Addr().String()), nil)
			resp, body := l.get("/", "")
			if resp.StatusCode != 200 || body != want {
				t.Errorf("got %d %q, want 200 %q", resp.StatusCode, body, want)
			}
		})
	}
}

func TestH2CGetIsRetried(t *testing.T) {
	// An HTTP/2 GET's Body is not http.NoBody; it must still count as
	// body-less, so the default policy retries its 503.
	bad := newBackend(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	l := newLab(t, basic("", "", bad.addr(), be.addr()), nil)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	for i := range 4 {
		resp, err := (&http.Client{Transport: tr}).Get(l.url + "/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
			t.Fatalf("request %d: %s %d, want HTTP/2.0 200", i, resp.Proto, resp.StatusCode)
		}
	}
	if bad.hits.Load() == 0 {
		t.Error("no request tried the failing backend; the test proves nothing")
	}
}

// h2Client returns an HTTP/2 client for the entry (h2c with prior
// knowledge, or h2 over TLS).
func h2Client(t testing.TB, e h2Entry) *http.Client {
	var p http.Protocols
	p.SetHTTP2(e.tls)
	p.SetUnencryptedHTTP2(!e.tls)
	tr := &http.Transport{Protocols: &p, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the test's own certificate
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// TestH2LargeBodiesStream: an 8 MiB request body (8× the receive
// windows) is echoed back over HTTP/2 whole and in order, on every
// entry and HTTP/2 server loop, and 16 concurrent uploads on one
// connection share its window.
func TestH2LargeBodiesStream(t *testing.T) {
	t.Parallel()
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		io.Copy(w, r.Body)
	})
	for _, e := range h2Entries {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			l := e.lab(t, basic("", "", be.addr()))
			client := h2Client(t, e)
			body := make([]byte, 8<<20)
			rand.Read(body)
			errs := make(chan error, 16)
			for i := range 16 {
				go func() {
					n := len(body) >> min(i, 4)
					resp, err := client.Post(l.url+"/echo", "application/octet-stream", bytes.NewReader(body[:n]))
					if err != nil {
						errs <- err
						return
					}
					got, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					switch {
					case err != nil:
						errs <- err
					case resp.ProtoMajor != 2 || resp.StatusCode != 200 || !bytes.Equal(got, body[:n]):
						errs <- fmt.Errorf("upload %d: %s %d, %d bytes back of %d (equal %v)", i, resp.Proto, resp.StatusCode, len(got), n, bytes.Equal(got, body[:n]))
					default:
						errs <- nil
					}
				}()
			}
			for range 16 {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestH2StreamingResponseAndTrailers: over HTTP/2, a flushed response
// arrives chunk by chunk while the backend still writes, and the
// backend's trailers reach the client.
func TestH2StreamingResponseAndTrailers(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		io.WriteString(w, "first;")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		io.WriteString(w, "second")
		w.Header().Set("X-Checksum", "abc")
	})
	for _, e := range h2Entries {
		t.Run(e.name, func(t *testing.T) {
			l := e.lab(t, basic("", "", be.addr()))
			resp, err := h2Client(t, e).Get(l.url + "/")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			buf := make([]byte, 6)
			if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first;" {
				t.Fatalf("first chunk %q, %v", buf, err)
			}
			release <- struct{}{}
			rest, err := io.ReadAll(resp.Body)
			if err != nil || string(rest) != "second" {
				t.Fatalf("rest %q, %v", rest, err)
			}
			if got := resp.Trailer.Get("X-Checksum"); got != "abc" {
				t.Errorf("trailer X-Checksum = %q, want abc", got)
			}
		})
	}
}
