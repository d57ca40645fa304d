package h2

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// closedStreamAnswer sends a GET on stream 1, reads its response to
// END_STREAM, sends HEADERS on stream 1 again at once and returns the
// first frame the server answers with.
func closedStreamAnswer(t *testing.T) http2.Frame {
	t.Helper()
	cc, sc := net.Pipe()
	defer cc.Close()
	go serveSpillway(sc, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	cc.SetDeadline(time.Now().Add(10 * time.Second))
	w := newScript()
	w.buf.WriteString(http2.ClientPreface)
	w.fr.WriteSettings()
	w.headers(1, true)
	go cc.Write(bytes.Clone(w.buf.Bytes()))
	fr := http2.NewFramer(io.Discard, cc)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the response: %v", err)
		}
		if f.Header().StreamID == 1 && f.Header().Flags.Has(http2.FlagDataEndStream) {
			break
		}
	}
	w.buf.Reset()
	w.headers(1, true)
	go cc.Write(bytes.Clone(w.buf.Bytes()))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		switch f.(type) {
		case *http2.GoAwayFrame, *http2.RSTStreamFrame:
			return f
		}
	}
}

// HEADERS on a stream whose response the client has read to its
// END_STREAM (the request having ended too) is on a closed stream: a
// connection error (RFC 9113 §5.1, h2spec http2/5.1/12), never a
// stream error for a half-closed stream, however soon it comes after
// the response. The stream closed only after END_STREAM was flushed,
// so a quick client could find it still open.
func TestHeadersOnStreamJustClosed(t *testing.T) {
	for i := range 200 {
		if f := closedStreamAnswer(t); f.Header().Type != http2.FrameGoAway {
			t.Fatalf("try %d: got %v, want GOAWAY", i, f)
		}
	}
}
