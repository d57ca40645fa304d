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

// A stream the client reset is closed (RFC 9113 §5.1): the handler the
// reset cancelled, aborting on its way out as the proxy does, must not
// answer the reset with a RST_STREAM of its own (§5.4.2: never a
// RST_STREAM in response to a RST_STREAM), nor record the stream as one
// the server reset, whose late frames are ignored: HEADERS on it is a
// connection error however late it comes. h2spec http2/5.1/9 timed out
// when that cleanup ran before the second HEADERS was read.
func TestHeadersAfterClientResetOnceHandlerEnded(t *testing.T) {
	for i := range 10 {
		f := headersAfterClientReset(t)
		if f.Header().Type != http2.FrameGoAway {
			t.Fatalf("try %d: got %v, want GOAWAY (the PING after the HEADERS is answered with an ACK, so an ACK first means the HEADERS was ignored)", i, f)
		}
	}
}

// headersAfterClientReset opens stream 1, resets it, waits for its
// handler to end, then sends HEADERS on stream 1 and a PING, and
// returns the first GOAWAY, RST_STREAM or PING ACK the server sends.
func headersAfterClientReset(t *testing.T) http2.Frame {
	t.Helper()
	cc, sc := net.Pipe()
	defer cc.Close()
	ended := make(chan struct{})
	go serveSpillway(sc, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		close(ended)
		panic(http.ErrAbortHandler) // as the proxy does when its client is gone
	}))
	cc.SetDeadline(time.Now().Add(10 * time.Second))
	frames := make(chan http2.Frame, 16)
	go func() { // net.Pipe blocks the server's writes until read
		defer close(frames)
		fr := http2.NewFramer(io.Discard, cc)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.GoAwayFrame, *http2.RSTStreamFrame:
				frames <- f
			case *http2.PingFrame:
				if f.IsAck() {
					frames <- f
				}
			}
		}
	}()
	w := newScript()
	w.buf.WriteString(http2.ClientPreface)
	w.fr.WriteSettings()
	w.headers(1, false)
	w.rst(1)
	if _, err := cc.Write(bytes.Clone(w.buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	<-ended
	// The handler's cleanup runs after it returns; waiting makes the
	// order of the old race certain (no bound is asserted).
	time.Sleep(20 * time.Millisecond)
	w.buf.Reset()
	w.headers(1, true)
	w.fr.WritePing(false, [8]byte{1})
	go cc.Write(bytes.Clone(w.buf.Bytes()))
	f, ok := <-frames
	if !ok {
		t.Fatal("the server sent no GOAWAY, RST_STREAM or PING ACK")
	}
	return f
}
