package proxy_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/proxy"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2conn is a raw HTTP/2 client connection for tests: it writes header
// lists exactly as given (no validation, so that a test can send what a
// hostile client would) and reads the server's frames back.
type h2conn struct {
	t    testing.TB
	c    net.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	next uint32        // next client stream id
	wait time.Duration // how long response waits for a frame (default 10 s)
}

// h2Entry names an HTTP/2 entry point of a lab: cleartext with prior
// knowledge, or h2 negotiated by ALPN over TLS.
type h2Entry struct {
	name string
	tls  bool
	h2   proxy.HTTP2Server // the HTTP/2 server loop
}

// h2Entries are the entry points a lab's HTTP/2 tests run against. On
// the default loop (h1.Server) cleartext prior knowledge is the
// hand-off from the HTTP/1.1 loop; with SPILLWAY_TEST_HTTP1_SERVER=NET_HTTP
// it is net/http's own h2c. Each runs on both HTTP/2 server loops.
var h2Entries = []h2Entry{
	{"h2c", false, proxy.H2NetHTTP}, {"h2-tls", true, proxy.H2NetHTTP},
	{"h2c-spillway", false, proxy.H2Spillway}, {"h2-tls-spillway", true, proxy.H2Spillway},
}

// lab is newLab for the entry: its TLS and HTTP/2 server loop.
func (e h2Entry) lab(t testing.TB, yamlText string, opts ...labOption) *lab {
	t.Helper()
	return newLabServer(t, yamlText, e.tlsConfig(t), labServer{netHTTP: os.Getenv("SPILLWAY_TEST_HTTP1_SERVER") == "NET_HTTP", h2: e.h2}, opts...)
}

// tlsConfig returns the lab's TLS config for the entry: a fresh
// self-signed certificate for h2 over TLS, nil for h2c.
func (e h2Entry) tlsConfig(t testing.TB) *tls.Config {
	if !e.tls {
		return nil
	}
	return selfSigned(t)
}

// dialH2 opens an HTTP/2 connection to addr: the client preface and an
// empty SETTINGS frame, over TLS with ALPN h2 when useTLS is set.
func dialH2(t testing.TB, addr string, useTLS bool) *h2conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if useTLS {
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // the test's own certificate
		if err := tc.Handshake(); err != nil {
			c.Close()
			t.Fatalf("TLS handshake: %v", err)
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
			c.Close()
			t.Fatalf("ALPN negotiated %q, want h2", p)
		}
		c = tc
	}
	t.Cleanup(func() { c.Close() })
	h := &h2conn{t: t, c: c, fr: http2.NewFramer(c, c), next: 1}
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.fr.MaxHeaderListSize = 1 << 20
	h.enc = hpack.NewEncoder(&h.hbuf)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return h
}

// block encodes a header list (name, value pairs) as an HPACK block,
// without checking the fields.
func (h *h2conn) block(fields ...string) []byte {
	h.hbuf.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		h.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return bytes.Clone(h.hbuf.Bytes())
}

// request sends one complete header block (HEADERS with END_HEADERS) on a
// new stream, ending the stream unless body is non-nil, in which case
// body follows in one DATA frame with END_STREAM. It returns the stream id.
func (h *h2conn) request(body []byte, fields ...string) uint32 {
	h.t.Helper()
	id := h.next
	h.next += 2
	err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.block(fields...), EndStream: body == nil, EndHeaders: true})
	if err == nil && body != nil {
		err = h.fr.WriteData(id, true, body)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return id
}

// requestTrailers sends a request whose body (one DATA frame) is
// followed by a trailer block (HEADERS with END_STREAM), both written
// unchecked. It returns the stream id.
func (h *h2conn) requestTrailers(body []byte, trailer []string, fields ...string) uint32 {
	h.t.Helper()
	id := h.next
	h.next += 2
	err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.block(fields...), EndHeaders: true})
	if err == nil {
		err = h.fr.WriteData(id, false, body)
	}
	if err == nil {
		err = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.block(trailer...), EndStream: true, EndHeaders: true})
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return id
}

// get is request for a body-less request with the usual pseudo-headers.
func (h *h2conn) get(method, authority, path string, extra ...string) uint32 {
	return h.request(nil, append([]string{":method", method, ":scheme", "http", ":authority", authority, ":path", path}, extra...)...)
}

// h2Response is what a stream got back.
type h2Response struct {
	status  int
	header  http.Header
	body    []byte
	trailer http.Header   // the header block after the final head, if any
	reset   http2.ErrCode // RST_STREAM's code, when the stream was reset
	goAway  bool          // the connection got GOAWAY before the stream ended
}

// errH2Closed is read's error when the connection closed.
var errH2Closed = errors.New("connection closed")

// response reads frames until stream id ends (END_STREAM, RST_STREAM or
// GOAWAY covering it), answering PING and acknowledging SETTINGS. It
// fails the test on a read error other than the connection closing,
// which it returns.
func (h *h2conn) response(id uint32) (h2Response, error) {
	h.t.Helper()
	var r h2Response
	wait := h.wait
	if wait == 0 {
		wait = 10 * time.Second
	}
	h.c.SetReadDeadline(time.Now().Add(wait))
	defer h.c.SetReadDeadline(time.Time{})
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
				return r, errH2Closed
			}
			return r, err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				h.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				h.fr.WritePing(true, f.Data)
			}
		case *http2.GoAwayFrame:
			if f.LastStreamID < id {
				r.goAway = true
				return r, nil
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				r.reset = f.ErrCode
				return r, nil
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != id {
				continue
			}
			if r.status == 0 || r.status < 200 {
				r.header = http.Header{}
				for _, hf := range f.RegularFields() {
					r.header.Add(hf.Name, hf.Value)
				}
				r.status, _ = strconv.Atoi(f.PseudoValue("status"))
			} else {
				r.trailer = http.Header{}
				for _, hf := range f.RegularFields() {
					r.trailer.Add(hf.Name, hf.Value)
				}
			}
			if f.StreamEnded() {
				return r, nil
			}
		case *http2.DataFrame:
			if f.StreamID != id {
				continue
			}
			r.body = append(r.body, f.Data()...)
			if n := len(f.Data()); n > 0 {
				h.fr.WriteWindowUpdate(0, uint32(n))
				h.fr.WriteWindowUpdate(id, uint32(n))
			}
			if f.StreamEnded() {
				return r, nil
			}
		}
	}
}

// mustResponse is response, failing the test when the connection closed
// before the stream ended.
func (h *h2conn) mustResponse(id uint32) h2Response {
	h.t.Helper()
	r, err := h.response(id)
	if err != nil {
		h.t.Fatalf("stream %d: %v", id, err)
	}
	return r
}

func (r h2Response) String() string {
	switch {
	case r.goAway:
		return "GOAWAY"
	case r.reset != 0:
		return "RST_STREAM " + r.reset.String()
	}
	return fmt.Sprintf("%d %s", r.status, r.header.Get("X-Spillway-Status-Details"))
}

// isReset reports a connection reset by the peer.
func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}
