package h1

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// h2Frame is one frame http2.Framer read: its header and where it
// starts and ends in the stream.
type h2Frame struct {
	fh         http2.FrameHeader
	start, end int
}

// framerFrames reads body (frames, after the preface) with http2.Framer
// as the HTTP/2 server does, ordering checks included, and returns the
// frames it read up to its first error that ends a connection (a stream
// error does not: the server resets the stream and reads on), and how
// far they are known: to the end of the last one, or of body when the
// last one is cut short (its end then lies past body).
func framerFrames(body []byte) ([]h2Frame, int) {
	r := bytes.NewReader(body)
	fr := http2.NewFramer(io.Discard, r)
	fr.SetMaxReadFrameSize(1<<24 - 1)
	var frames []h2Frame
	known := 0
	for {
		start := len(body) - r.Len()
		fh, err := fr.ReadFrameHeader()
		if err != nil {
			return frames, known
		}
		if end := start + 9 + int(fh.Length); end > len(body) {
			frames = append(frames, h2Frame{fh: fh, start: start, end: end})
			return frames, len(body)
		}
		_, err = fr.ReadFrameForHeader(fh)
		var se http2.StreamError
		if err != nil && !errors.As(err, &se) {
			return frames, known
		}
		known = len(body) - r.Len()
		frames = append(frames, h2Frame{fh: fh, start: start, end: known})
	}
}

// h2Expect is what the follower should have seen after some bytes.
type h2Expect struct {
	hdrN, skip    int  // position within the frame
	open          bool // a header block is open
	opened, ended int  // header block events so far
}

// expectAt derives h2Expect at stream offset off (the preface is pre
// bytes) from the frames Framer read (offsets after the preface).
func expectAt(frames []h2Frame, pre, off int) h2Expect {
	if off < pre {
		return h2Expect{skip: pre - off}
	}
	o := off - pre
	var e h2Expect
	for _, f := range frames {
		hdrEnd := f.start + 9
		eh := f.fh.Flags.Has(http2.FlagHeadersEndHeaders)
		starts := f.fh.Type == http2.FrameHeaders && !e.open
		inBlock := starts || (f.fh.Type == http2.FrameContinuation && e.open)
		if o < hdrEnd {
			e.hdrN = o - f.start
			return e
		}
		if starts && (!eh || f.fh.Length > 0) {
			e.opened++ // an empty HEADERS with END_HEADERS reports its end alone
		}
		if o < f.end {
			e.skip = f.end - o
			e.open = e.open || starts
			return e
		}
		if inBlock {
			e.open = !eh
			if eh {
				e.ended++
			}
		}
	}
	return e
}

// FuzzH2Frames checks the follower against http2.Framer on arbitrary
// byte streams cut at arbitrary points: wherever a chunk ends within the
// frames Framer accepts, the follower's position in the frame, its
// header-block state and the block events it reported must agree with
// Framer's frame boundaries and ordering; past them it must not panic.
func FuzzH2Frames(f *testing.F) {
	var seed bytes.Buffer
	fr := http2.NewFramer(&seed, nil)
	fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 14})
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte("abc"), EndHeaders: true, EndStream: true})
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte("ab")})
	fr.WriteContinuation(3, false, nil)
	fr.WriteContinuation(3, false, []byte("c"))
	fr.WriteContinuation(3, true, []byte("de"))
	fr.WriteData(3, true, []byte("body"))
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, EndHeaders: true})
	fr.WritePing(false, [8]byte{})
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 7, BlockFragment: []byte("x"), EndHeaders: true, PadLength: 3, Priority: http2.PriorityParam{StreamDep: 7}})
	fr.WriteWindowUpdate(0, 1000)
	f.Add(seed.Bytes(), []byte{0, 8, 3, 200}, true)
	f.Add(seed.Bytes(), []byte{255}, false)
	f.Add([]byte(h2Preface+"\x00\x00\x00\x09\x00\x00\x00\x00\x01"), []byte{1}, true)
	f.Fuzz(func(t *testing.T, data, cuts []byte, preface bool) {
		pre := 0
		stream := data
		if preface {
			pre = len(h2Preface)
			stream = append([]byte(h2Preface), data...)
		}
		frames, known := framerFrames(stream[pre:])
		checked := pre + known
		var w h2Frames
		if preface {
			w.skip = uint32(pre)
		}
		var opened, ended int
		off, k := 0, 0
		for off < len(stream) {
			n := 1 + len(stream)
			if len(cuts) > 0 {
				n = 1 + int(cuts[k%len(cuts)])
				k++
			}
			chunk := stream[off:min(off+n, len(stream))]
			for len(chunk) > 0 {
				rest, ev := w.next(chunk)
				if len(rest) >= len(chunk) && ev == h2Nothing {
					t.Fatalf("next made no progress at %d", off)
				}
				switch ev {
				case h2BlockOpened:
					opened++
				case h2BlockEnded:
					ended++
				}
				off += len(chunk) - len(rest)
				chunk = rest
			}
			if off > checked {
				continue
			}
			want := expectAt(frames, pre, off)
			got := h2Expect{hdrN: int(w.hdrN), skip: int(w.skip), open: w.open, opened: opened, ended: ended}
			if got != want {
				t.Fatalf("at %d of %d (Framer read %d frames to %d): follower %+v, want %+v", off, len(stream), len(frames), checked, got, want)
			}
		}
	})
}

// loopbackPair returns the two ends of a TCP connection on 127.0.0.1.
func loopbackPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// watched wraps the server end in WatchH2 and reads it in the
// background, as an HTTP/2 server would; the channel is closed when a
// read fails (the watch closed the connection).
func watched(t *testing.T, server net.Conn, timeout time.Duration) <-chan struct{} {
	t.Helper()
	w := WatchH2(server, timeout, false)
	t.Cleanup(func() { w.Close() })
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 7) // short reads: frames arrive in pieces
		for {
			if _, err := w.Read(buf); err != nil {
				return
			}
		}
	}()
	return done
}

// WatchH2 closes a connection whose client is slow with a header block,
// before or after its first complete one, and leaves an idle one alone.
func TestWatchH2(t *testing.T) {
	t.Parallel()
	// Long enough that the clients' pauses (a quarter and a half of it)
	// stay well within it on a loaded machine.
	const timeout = 400 * time.Millisecond
	headers := func(fr *http2.Framer, id uint32, endHeaders bool) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte("block"), EndHeaders: endHeaders, EndStream: true})
	}
	cases := []struct {
		name   string
		client func(fr *http2.Framer, c net.Conn)
		closed bool
	}{
		{"preface and SETTINGS only", func(fr *http2.Framer, c net.Conn) { fr.WriteSettings() }, true},
		{"complete header block, then idle", func(fr *http2.Framer, c net.Conn) {
			fr.WriteSettings()
			headers(fr, 1, true)
		}, false},
		{"requests, each within the timeout", func(fr *http2.Framer, c net.Conn) {
			for id := uint32(1); id < 12; id += 2 {
				headers(fr, id, false)
				time.Sleep(timeout / 4)
				fr.WriteContinuation(id, true, []byte("more"))
				time.Sleep(timeout / 2)
			}
		}, false},
		{"request, idle past the timeout, block left open", func(fr *http2.Framer, c net.Conn) {
			headers(fr, 1, true)
			time.Sleep(3 * timeout) // the timer parks
			headers(fr, 3, false)
		}, true},
		{"request, then CONTINUATION trickle", func(fr *http2.Framer, c net.Conn) {
			headers(fr, 1, true)
			headers(fr, 3, false)
			for range 50 {
				time.Sleep(timeout / 4)
				if fr.WriteContinuation(3, false, nil) != nil {
					return
				}
			}
		}, true},
		{"request, then HEADERS payload trickle", func(fr *http2.Framer, c net.Conn) {
			headers(fr, 1, true)
			c.Write([]byte{0, 0, 100, byte(http2.FrameHeaders), 0x5, 0, 0, 0, 3})
			for range 100 {
				time.Sleep(timeout / 4)
				if _, err := c.Write([]byte{0}); err != nil {
					return
				}
			}
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, server := loopbackPair(t)
			done := watched(t, server, timeout)
			io.WriteString(client, h2Preface)
			go tc.client(http2.NewFramer(client, nil), client)
			wait := 10 * time.Second
			if !tc.closed {
				wait = 12 * timeout
			}
			select {
			case <-done:
				if !tc.closed {
					t.Fatal("the connection was closed")
				}
			case <-time.After(wait):
				if tc.closed {
					t.Fatalf("the connection is still open after %v", wait)
				}
			}
		})
	}
}

// The follower allocates nothing per Read.
func TestWatchH2FollowAllocs(t *testing.T) {
	_, server := loopbackPair(t)
	w := WatchH2(server, time.Minute, true).(*h2Watch)
	defer w.Close()
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: make([]byte, 40), EndHeaders: true, EndStream: true})
	fr.WriteData(1, true, make([]byte, 100))
	frames := b.Bytes()
	if n := testing.AllocsPerRun(100, func() {
		w.follow(frames[:9])
		w.follow(frames[9:])
	}); n != 0 {
		t.Fatalf("%v allocations per request, want 0", n)
	}
}

// BenchmarkWatchH2Follow: the follower's work for one request as the
// HTTP/2 server reads it (a HEADERS frame, header and payload in two
// reads, and a DATA frame likewise).
func BenchmarkWatchH2Follow(b *testing.B) {
	_, server := loopbackPair(b)
	w := WatchH2(server, time.Minute, true).(*h2Watch)
	defer w.Close()
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: make([]byte, 40), EndHeaders: true, EndStream: true})
	fr.WriteData(1, true, make([]byte, 100))
	p := buf.Bytes()
	b.ReportAllocs()
	for b.Loop() {
		w.follow(p[:9])
		w.follow(p[9:58])
		w.follow(p[58:67])
		w.follow(p[67:])
	}
}
