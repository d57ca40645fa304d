package proxy_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// The frontends advertise and enforce HTTP/2's default
// SETTINGS_MAX_FRAME_SIZE, 16 KiB (RFC 9113 §4.2, §6.5.2): a larger
// HEADERS frame is a connection error of type FRAME_SIZE_ERROR and
// reaches no backend. net/http's default, 1 MiB, let a single frame make
// the connection keep a 1 MiB read buffer for as long as it lives (found
// by h2spec http2/4.2/3).
func TestH2MaxFrameSize(t *testing.T) {
	for _, e := range h2Entries {
		t.Run(e.name, func(t *testing.T) {
			be := newBackend(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
			l := e.lab(t, basic("", "", be.addr()))
			h := dialH2(t, l.addr, e.tls)
			h.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			f, err := h.fr.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			sf, ok := f.(*http2.SettingsFrame)
			if !ok {
				t.Fatalf("first frame %v, want the server's SETTINGS", f)
			}
			if v, ok := sf.Value(http2.SettingMaxFrameSize); ok && v != 16384 {
				t.Errorf("SETTINGS_MAX_FRAME_SIZE %d, want 16384", v)
			}
			if r := h.mustResponse(h.get("GET", "x", "/")); r.status != 200 {
				t.Fatalf("a small request: %v", r)
			}
			// Ten distinct 4,000-byte fields (each evicts the last from
			// the 4 KiB HPACK table; Huffman-coded to about 2,500 bytes):
			// a 25 KB block in one HEADERS frame, 40 KB of fields, within
			// the 60 KiB header limit.
			var fields []string
			for i := range 10 {
				fields = append(fields, "x-dummy"+string(rune('0'+i)), strings.Repeat(string(rune('a'+i)), 4000))
			}
			id := h.get("GET", "x", "/", fields...)
			code, err := goAwayCode(h)
			if err != nil {
				t.Fatalf("after a 25 KB HEADERS frame (stream %d): %v, want GOAWAY FRAME_SIZE_ERROR", id, err)
			}
			if code != http2.ErrCodeFrameSize {
				t.Errorf("after a 25 KB HEADERS frame: GOAWAY %v, want FRAME_SIZE_ERROR", code)
			}
			if n := be.hits.Load(); n != 1 {
				t.Errorf("the backend saw %d requests, want 1 (the small one)", n)
			}
		})
	}
}

// goAwayCode reads frames until a GOAWAY and returns its code; an error
// when the connection closes first, a stream ends, or 10 s pass.
func goAwayCode(h *h2conn) (http2.ErrCode, error) {
	h.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer h.c.SetReadDeadline(time.Time{})
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return 0, err
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			return f.ErrCode, nil
		case *http2.DataFrame:
			if f.StreamEnded() {
				return 0, errStreamAnswered
			}
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				return 0, errStreamAnswered
			}
		}
	}
}

// errStreamAnswered is goAwayCode's error when a stream got a response.
var errStreamAnswered = errors.New("the stream was answered")

// Connection-specific fields make an HTTP/2 request malformed (RFC 9113
// §8.2.2); net/http's HTTP/2 server answers it 400 where h2spec
// (http2/8.1.2.2) wants RST_STREAM PROTOCOL_ERROR, which §8.1.1 allows
// ("a server MAY send an HTTP response prior to closing or resetting the
// stream"). This guards the exception h2spec's test lists: the request
// never reaches a backend. "te: trailers" is allowed.
func TestH2ConnectionSpecificFieldsRefused(t *testing.T) {
	bad := [][2]string{
		{"connection", "keep-alive"},
		{"keep-alive", "timeout=5"},
		{"proxy-connection", "keep-alive"},
		{"transfer-encoding", "chunked"},
		{"upgrade", "websocket"},
		{"te", "gzip"},
		{"te", "trailers, gzip"},
	}
	for _, e := range h2Entries {
		t.Run(e.name, func(t *testing.T) {
			be := newBackend(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
			l := e.lab(t, basic("", "", be.addr()))
			for _, f := range bad {
				h := dialH2(t, l.addr, e.tls)
				r, err := h.response(h.get("GET", "x", "/", f[0], f[1]))
				if err == nil && r.status != 400 && r.reset != http2.ErrCodeProtocol && !r.goAway {
					t.Errorf("%s: %s: %v, want 400 or a stream or connection error", f[0], f[1], r)
				}
			}
			if n := be.hits.Load(); n != 0 {
				t.Errorf("the backend saw %d malformed requests", n)
			}
			h := dialH2(t, l.addr, e.tls)
			if r := h.mustResponse(h.get("GET", "x", "/", "te", "trailers")); r.status != 200 {
				t.Errorf("te: trailers: %v, want 200", r)
			}
		})
	}
}
