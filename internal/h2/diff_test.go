package h2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The frame-level differential harness. A script of client frames goes
// to this package's server and to golang.org/x/net/http2's, each on a
// net.Pipe with the same handler (answers 200 "ok" without reading the
// body, once the server has applied every frame of the script). The frames each sends back are reduced to an
// outcome per RFC 9113's rules:
//
//	F1  The connection error: the GOAWAY error code, if any (NO_ERROR
//	    GOAWAYs, which a client's GOAWAY provokes, are not errors).
//	F2  Per stream the client opened: answered (the :status), or reset
//	    by the server with a code other than NO_ERROR (a stream error),
//	    or neither. A stream the client reset itself is left out (who
//	    wins that race is timing).
//	F3  The handler was called for the same streams: this server never
//	    serves a request x/net refuses, nor refuses one it serves.
//
// After the script the client sends a PING, waits for its ACK (both
// servers apply frames in order), waits for the handlers it started,
// and reads until a second PING's ACK or the connection's end.

// diffOutcome is what one server did with a script.
type diffOutcome struct {
	goAway  string            // the GOAWAY error code, "" for none
	streams map[uint32]string // stream -> "status 200" or "reset PROTOCOL_ERROR"
	called  []uint32          // streams whose handler ran
}

func (o diffOutcome) String() string {
	ids := slices.Sorted(maps.Keys(o.streams))
	var b strings.Builder
	fmt.Fprintf(&b, "goaway=%q", o.goAway)
	for _, id := range ids {
		fmt.Fprintf(&b, " %d:%s", id, o.streams[id])
	}
	fmt.Fprintf(&b, " called=%v", o.called)
	return b.String()
}

// diffHandler answers every request 200 "ok" and records its stream.
// It answers only once synced is closed: when the server has acked the
// PING sent after the script, so it has applied every frame of the
// script (both servers apply frames in order). An answer therefore
// never races the reader's checks of the frames after the HEADERS
// (DATA over content-length, DATA after END_STREAM): without the wait,
// which one the server saw first was the scheduler's choice and the
// two servers could disagree on a starved machine.
type diffHandler struct {
	mu     sync.Mutex
	called map[string]bool
	synced chan struct{}
}

func (h *diffHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.called[r.Header.Get("X-Id")] = true
	h.mu.Unlock()
	select {
	case <-h.synced:
	case <-time.After(5 * time.Second): // bounded: a harness bug must not hang
	}
	io.WriteString(w, "ok")
}

// pingData marks the harness's PINGs.
var pingData = [1][8]byte{{'s', 'y', 'n', 'c', 0, 0, 0, 1}}

// runScript runs script (raw frames, after the preface and an empty
// SETTINGS) against serve and returns the outcome.
func runScript(t testing.TB, script []byte, serve func(net.Conn, http.Handler)) diffOutcome {
	cc, sc := net.Pipe()
	h := &diffHandler{called: map[string]bool{}, synced: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		serve(sc, h)
	}()
	defer func() {
		cc.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Errorf("server did not end after the client closed")
		}
	}()
	fr := http2.NewFramer(cc, cc)
	go func() {
		var b bytes.Buffer
		b.WriteString(http2.ClientPreface)
		w := http2.NewFramer(&b, nil)
		w.WriteSettings()
		b.Write(script)
		w.WritePing(false, pingData[0])
		cc.Write(b.Bytes())
	}()
	out := diffOutcome{streams: map[uint32]string{}}
	cc.SetReadDeadline(time.Now().Add(2 * time.Second))
	dec := hpack.NewDecoder(4096, nil)
	synced := readUntilPing(fr, dec, &out, 0)
	close(h.synced) // the handlers may answer now
	switch {
	case synced:
		// Every frame is applied; give the handler goroutines time to
		// start (x/net starts them asynchronously), then wait (2 s at
		// most) for an answer on each stream served.
		time.Sleep(100 * time.Millisecond)
		drain(fr, cc, dec, &out, h)
	case out.goAway != "":
		// A connection error: nothing after it counts (F2 is left out),
		// and the server would linger reading for a second before it
		// closed. The handlers of the streams it took before the error
		// get the same time to start as above.
		time.Sleep(100 * time.Millisecond)
	}
	h.mu.Lock()
	out.called = calledStreams(h)
	h.mu.Unlock()
	return out
}

// drain reads frames until every stream served is answered and the
// server has been quiet for 50 ms, or for 2 s at most.
func drain(fr *http2.Framer, c net.Conn, dec *hpack.Decoder, out *diffOutcome, h *diffHandler) {
	end := time.Now().Add(2 * time.Second)
	for time.Now().Before(end) {
		dl := time.Now().Add(50 * time.Millisecond)
		if dl.After(end) {
			dl = end
		}
		c.SetReadDeadline(dl)
		f, err := fr.ReadFrame()
		if err == nil {
			record(f, dec, out)
			continue
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || answered(h, *out) {
			return
		}
	}
}

// answered reports whether every stream whose handler ran has an
// outcome.
func answered(h *diffHandler, out diffOutcome) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range calledStreams(h) {
		if out.streams[id] == "" {
			return false
		}
	}
	return true
}

func calledStreams(h *diffHandler) []uint32 {
	var ids []uint32
	for id := range h.called {
		var n uint32
		fmt.Sscan(id, &n)
		ids = append(ids, n)
	}
	slices.Sort(ids)
	return ids
}

// readUntilPing reads frames into out until the ACK of PING n (true),
// or a connection error's GOAWAY, the connection's end or the deadline
// (false).
func readUntilPing(fr *http2.Framer, dec *hpack.Decoder, out *diffOutcome, n int) bool {
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return false
		}
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() && p.Data == pingData[n] {
			return true
		}
		record(f, dec, out)
		if out.goAway != "" {
			return false
		}
	}
}

// readFrame reads one frame into out, reporting false at the end.
func readFrame(fr *http2.Framer, dec *hpack.Decoder, out *diffOutcome) bool {
	f, err := fr.ReadFrame()
	if err != nil {
		return false
	}
	record(f, dec, out)
	return true
}

// record notes what a server frame says about the outcome.
func record(f http2.Frame, dec *hpack.Decoder, out *diffOutcome) {
	{
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			// STREAM_CLOSED after an answer is the race of the client's
			// DATA with the server's RST_STREAM NO_ERROR: left out.
			answeredBefore := strings.HasPrefix(out.streams[f.StreamID], "status")
			if f.ErrCode != http2.ErrCodeNo && !(f.ErrCode == http2.ErrCodeStreamClosed && answeredBefore) {
				out.goAway = f.ErrCode.String()
			}
		case *http2.RSTStreamFrame:
			// A stream error wins over an answer sent before it: which
			// comes first is the handler's race with the reader.
			// STREAM_CLOSED after an answer is the race of the client's
			// DATA with the server's RST_STREAM NO_ERROR: left out.
			answeredBefore := strings.HasPrefix(out.streams[f.StreamID], "status")
			if f.ErrCode != http2.ErrCodeNo && !(f.ErrCode == http2.ErrCodeStreamClosed && answeredBefore) {
				out.streams[f.StreamID] = "reset " + f.ErrCode.String()
			}
		case *http2.HeadersFrame:
			fields, _ := dec.DecodeFull(f.HeaderBlockFragment())
			for _, hf := range fields {
				if hf.Name == ":status" && hf.Value[0] != '1' && out.streams[f.StreamID] == "" {
					out.streams[f.StreamID] = "status " + hf.Value
				}
			}
		}
	}
}

// serveSpillway and serveXNet serve a connection on each server.
func serveSpillway(c net.Conn, h http.Handler) {
	s := &Server{MaxReadFrameSize: DefaultMaxReadFrameSize}
	s.ServeConn(c, ServeConnOpts{Handler: h, BaseConfig: &http.Server{}})
}

func serveXNet(c net.Conn, h http.Handler) {
	s := &http2.Server{MaxReadFrameSize: DefaultMaxReadFrameSize}
	s.ServeConn(c, &http2.ServeConnOpts{Handler: h, BaseConfig: &http.Server{ErrorLog: log.New(io.Discard, "", 0)}})
}

// xnetRuns bounds how often a script runs on x/net's server when its
// outcome differs from this package's: x/net is not deterministic on
// some scripts (a frame on a stream it has reset is ignored while its
// RST_STREAM is still queued, a PROTOCOL_ERROR once it was written,
// which is its writer goroutine's race with its reader), so this
// server agrees when it does what x/net does on one of its runs.
const xnetRuns = 5

// diffScript runs w's script on both servers and fails t when this
// package's outcome is none of x/net's (see xnetRuns).
func diffScript(t testing.TB, w *scriptWriter) {
	t.Helper()
	s := runScript(t, w.buf.Bytes(), serveSpillway)
	var xs []diffOutcome
	for range xnetRuns {
		x := runScript(t, w.buf.Bytes(), serveXNet)
		why := compareOutcomes(w.reset, s, x)
		if why == "" {
			return
		}
		xs = append(xs, x)
		if len(xs) == xnetRuns {
			var b strings.Builder
			for _, x := range xs {
				fmt.Fprintf(&b, "\n  x/net:    %v", x)
			}
			t.Errorf("%s\n  spillway: %v%s", why, s, b.String())
		}
	}
}

// compareOutcomes applies F1–F3, leaving out the streams the script
// reset itself, and F2 after a connection error (whether a stream was
// answered before the connection closed is timing).
func compareOutcomes(clientReset map[uint32]bool, s, x diffOutcome) string {
	if s.goAway != x.goAway {
		return fmt.Sprintf("F1: GOAWAY %q, x/net %q", s.goAway, x.goAway)
	}
	for _, id := range slices.Sorted(maps.Keys(mergeKeys(s.streams, x.streams))) {
		if !clientReset[id] && s.goAway == "" && s.streams[id] != x.streams[id] {
			return fmt.Sprintf("F2: stream %d %q, x/net %q", id, s.streams[id], x.streams[id])
		}
	}
	sc := slices.DeleteFunc(slices.Clone(s.called), func(id uint32) bool { return clientReset[id] })
	xc := slices.DeleteFunc(slices.Clone(x.called), func(id uint32) bool { return clientReset[id] })
	if !slices.Equal(sc, xc) {
		return fmt.Sprintf("F3: handlers ran for %v, x/net %v", sc, xc)
	}
	return ""
}

func mergeKeys(a, b map[uint32]string) map[uint32]string {
	m := maps.Clone(a)
	maps.Copy(m, b)
	return m
}

// scriptWriter builds client frames.
type scriptWriter struct {
	buf   bytes.Buffer
	fr    *http2.Framer
	enc   *hpack.Encoder
	hbuf  bytes.Buffer
	reset map[uint32]bool
}

func newScript() *scriptWriter {
	w := &scriptWriter{reset: map[uint32]bool{}}
	w.fr = http2.NewFramer(&w.buf, nil)
	w.fr.AllowIllegalWrites = true
	w.enc = hpack.NewEncoder(&w.hbuf)
	return w
}

// block encodes a request header block: pseudo fields then kv pairs,
// with x-id naming the stream.
func (w *scriptWriter) block(id uint32, kv ...string) []byte {
	w.hbuf.Reset()
	fields := append([]string{":method", "GET", ":scheme", "http", ":authority", "a.example", ":path", "/"}, kv...)
	if len(kv) > 0 && kv[0] == "!raw" {
		fields = kv[1:]
	}
	for i := 0; i+1 < len(fields); i += 2 {
		w.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	w.enc.WriteField(hpack.HeaderField{Name: "x-id", Value: fmt.Sprint(id)})
	return slices.Clone(w.hbuf.Bytes())
}

func (w *scriptWriter) headers(id uint32, end bool, kv ...string) {
	w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: w.block(id, kv...), EndStream: end, EndHeaders: true})
}

func (w *scriptWriter) rst(id uint32) {
	w.reset[id] = true
	w.fr.WriteRSTStream(id, http2.ErrCodeCancel)
}

// raw appends a frame with any header fields.
func (w *scriptWriter) raw(typ http2.FrameType, flags http2.Flags, id uint32, payload []byte) {
	var h [9]byte
	h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	h[3], h[4] = byte(typ), byte(flags)
	binary.BigEndian.PutUint32(h[5:], id)
	w.buf.Write(h[:])
	w.buf.Write(payload)
}

// diffScripts are the seed scripts, one RFC 9113 rule each.
var diffScripts = []struct {
	name  string
	build func(w *scriptWriter)
}{
	{"simple GET", func(w *scriptWriter) { w.headers(1, true) }},
	{"POST with body", func(w *scriptWriter) {
		w.headers(1, false, "content-length", "3")
		w.fr.WriteData(1, true, []byte("abc"))
	}},
	{"body over content-length", func(w *scriptWriter) {
		w.headers(1, false, "content-length", "1")
		w.fr.WriteData(1, true, []byte("abc"))
	}},
	{"even stream", func(w *scriptWriter) { w.headers(2, true) }},
	{"stream ID going down", func(w *scriptWriter) { w.headers(5, true); w.headers(3, true) }},
	{"DATA on idle stream", func(w *scriptWriter) { w.fr.WriteData(1, true, []byte("x")) }},
	{"DATA on stream 0", func(w *scriptWriter) { w.raw(http2.FrameData, 0, 0, []byte("x")) }},
	{"DATA after END_STREAM", func(w *scriptWriter) { w.headers(1, true); w.fr.WriteData(1, true, []byte("x")) }},
	{"HEADERS after END_STREAM", func(w *scriptWriter) { w.headers(1, true); w.headers(1, true) }},
	{"trailers", func(w *scriptWriter) {
		w.headers(1, false, "trailer", "x-t")
		w.fr.WriteData(1, false, []byte("abc"))
		w.headers(1, true, "!raw", "x-t", "1")
	}},
	{"trailers without END_STREAM", func(w *scriptWriter) { w.headers(1, false); w.headers(1, false, "!raw", "x-t", "1") }},
	{"pseudo field in trailers", func(w *scriptWriter) { w.headers(1, false); w.headers(1, true, "!raw", ":path", "/") }},
	{"RST on idle stream", func(w *scriptWriter) { w.fr.WriteRSTStream(1, http2.ErrCodeCancel) }},
	{"client RST then DATA", func(w *scriptWriter) { w.headers(1, false); w.rst(1); w.fr.WriteData(1, true, []byte("x")) }},
	{"WINDOW_UPDATE 0", func(w *scriptWriter) { w.fr.WriteWindowUpdate(0, 0) }},
	{"WINDOW_UPDATE 0 on stream", func(w *scriptWriter) { w.headers(1, false); w.fr.WriteWindowUpdate(1, 0) }},
	{"WINDOW_UPDATE overflow", func(w *scriptWriter) { w.fr.WriteWindowUpdate(0, 1<<31-1); w.fr.WriteWindowUpdate(0, 1<<31-1) }},
	{"WINDOW_UPDATE stream overflow", func(w *scriptWriter) {
		w.headers(1, false)
		w.fr.WriteWindowUpdate(1, 1<<31-1)
		w.fr.WriteWindowUpdate(1, 1<<31-1)
	}},
	{"WINDOW_UPDATE on idle stream", func(w *scriptWriter) { w.fr.WriteWindowUpdate(3, 1) }},
	{"SETTINGS bad window", func(w *scriptWriter) {
		w.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31})
	}},
	{"SETTINGS bad frame size", func(w *scriptWriter) { w.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 100}) }},
	{"SETTINGS bad push", func(w *scriptWriter) { w.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 2}) }},
	{"SETTINGS duplicates", func(w *scriptWriter) {
		w.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 20})
	}},
	{"SETTINGS on a stream", func(w *scriptWriter) { w.raw(http2.FrameSettings, 0, 1, nil) }},
	{"SETTINGS bad length", func(w *scriptWriter) { w.raw(http2.FrameSettings, 0, 0, []byte{1, 2, 3}) }},
	{"unexpected SETTINGS ACK", func(w *scriptWriter) { w.fr.WriteSettingsAck(); w.fr.WriteSettingsAck() }},
	{"window 0 then response", func(w *scriptWriter) {
		w.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		w.headers(1, true)
	}},
	{"PING on a stream", func(w *scriptWriter) { w.raw(http2.FramePing, 0, 1, make([]byte, 8)) }},
	{"PING bad length", func(w *scriptWriter) { w.raw(http2.FramePing, 0, 0, make([]byte, 7)) }},
	{"PUSH_PROMISE", func(w *scriptWriter) { w.raw(http2.FramePushPromise, 4, 1, []byte{0, 0, 0, 2}) }},
	{"PRIORITY on itself", func(w *scriptWriter) { w.fr.WritePriority(1, http2.PriorityParam{StreamDep: 1}) }},
	{"HEADERS depending on itself", func(w *scriptWriter) {
		w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: w.block(1), EndStream: true, EndHeaders: true, Priority: http2.PriorityParam{StreamDep: 1, Weight: 1}})
	}},
	{"CONTINUATION alone", func(w *scriptWriter) { w.raw(http2.FrameContinuation, 4, 1, nil) }},
	{"CONTINUATION interleaved", func(w *scriptWriter) {
		w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: w.block(1), EndStream: true})
		w.fr.WriteData(1, true, nil)
	}},
	{"header block in CONTINUATIONs", func(w *scriptWriter) {
		b := w.block(1)
		w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:3], EndStream: true})
		w.fr.WriteContinuation(1, false, b[3:5])
		w.fr.WriteContinuation(1, true, b[5:])
	}},
	{"unknown frame type", func(w *scriptWriter) { w.raw(0x20, 0, 0, []byte("x")); w.headers(1, true) }},
	{"frame over max size", func(w *scriptWriter) { w.raw(http2.FrameData, 0, 1, make([]byte, 20000)) }},
	{"missing :path", func(w *scriptWriter) { w.headers(1, true, "!raw", ":method", "GET", ":scheme", "http") }},
	{"bad :scheme", func(w *scriptWriter) { w.headers(1, true, "!raw", ":method", "GET", ":scheme", "ftp", ":path", "/") }},
	{"unknown pseudo field", func(w *scriptWriter) { w.headers(1, true, ":foo", "x") }},
	{"pseudo after regular", func(w *scriptWriter) { w.headers(1, true, "accept", "*/*", ":status", "200") }},
	{"upper-case name", func(w *scriptWriter) { w.headers(1, true, "Foo", "1") }},
	{"connection field", func(w *scriptWriter) { w.headers(1, true, "connection", "close") }},
	{"te gzip", func(w *scriptWriter) { w.headers(1, true, "te", "gzip") }},
	{"host differs", func(w *scriptWriter) { w.headers(1, true, "host", "b.example") }},
	{"two hosts", func(w *scriptWriter) { w.headers(1, true, "host", "a.example", "host", "a.example") }},
	{"userinfo in :authority", func(w *scriptWriter) {
		w.headers(1, true, "!raw", ":method", "GET", ":scheme", "http", ":authority", "u@a.example", ":path", "/")
	}},
	{"CONNECT", func(w *scriptWriter) { w.headers(1, true, "!raw", ":method", "CONNECT", ":authority", "a.example:443") }},
	{"CONNECT with :path", func(w *scriptWriter) {
		w.headers(1, true, "!raw", ":method", "CONNECT", ":authority", "a.example:443", ":path", "/")
	}},
	{":protocol", func(w *scriptWriter) { w.headers(1, true, ":protocol", "websocket") }},
	{"header list too long", func(w *scriptWriter) { w.headers(1, true, "x-big", strings.Repeat("a", 12<<10)) }},
	{"DATA beyond the stream window", func(w *scriptWriter) {
		w.headers(1, false)
		for range 5 {
			w.fr.WriteData(1, false, make([]byte, 16<<10))
		}
	}},
	{"client GOAWAY", func(w *scriptWriter) { w.headers(1, true); w.fr.WriteGoAway(1, http2.ErrCodeNo, nil) }},
	{"many streams", func(w *scriptWriter) {
		for id := uint32(1); id < 40; id += 2 {
			w.headers(id, true)
		}
	}},
}

// TestDiffFrames runs the seed scripts through both servers.
func TestDiffFrames(t *testing.T) {
	t.Parallel()
	for _, sc := range diffScripts {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			w := newScript()
			sc.build(w)
			diffScript(t, w)
		})
	}
}
