package h1

import (
	"bufio"
	"io"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
)

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// FuzzFramingStream checks framingStream against net/http's server loop:
// for a stream of pipelined requests read as net/http's conn.readRequest
// does (up to 4 CR/LF bytes after a POST discarded, then http.ReadRequest,
// the body read to the end), each request must add exactly one entry to a
// follower fed that request's bytes, leave it at a request boundary, and
// get Content-Length and Transfer-Encoding flags equal to its raw head's
// (per textproto); a follower fed the whole stream in two pieces must queue
// the same entries; a request that is not HTTP/1 must stop both; nothing
// may panic. A follower that gave up (broken: fail closed) ends the check.
func FuzzFramingStream(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\nPOST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /n HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: v\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\nHost: x\nContent-Length: 5\n\nhelloPOST / HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\n\n5\r\nGET /\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		// The review's bypasses: CR/LF after a POST, a long
		// Content-Length, a chunk size over an int64, h2c.
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx\r\n\r\nPOST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0000000000000000005\r\n\r\nX\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\nAAAA",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00GET / HTTP/1.1\r\n\r\n",
	} {
		f.Add(s, 13)
	}
	f.Fuzz(func(t *testing.T, stream string, split int) {
		var whole, each framingStream // whole: fed in two pieces; each: request by request
		split = min(max(split, 0), len(stream))
		whole.follow([]byte(stream[:split]))
		whole.follow([]byte(stream[split:]))
		cr := &countingReader{r: strings.NewReader(stream)}
		br := bufio.NewReader(cr)
		fed := 0
		lastMethod := ""
		for i := 0; ; i++ {
			if lastMethod == "POST" {
				peek, _ := br.Peek(4)
				br.Discard(numLeadingCRorLF(peek))
			}
			start := cr.n - br.Buffered()
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			lastMethod = r.Method
			head := stream[start : cr.n-br.Buffered()]
			if r.ProtoMajor != 1 {
				each.follow([]byte(stream[fed : cr.n-br.Buffered()]))
				if _, ok := each.pop(); ok {
					t.Fatalf("request %d (%q) is not HTTP/1, yet the stream is followed", i, head)
				}
				if _, ok := whole.pop(); ok {
					t.Fatalf("request %d (%q) is not HTTP/1, yet the stream is followed", i, head)
				}
				return
			}
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				return
			}
			end := cr.n - br.Buffered()
			queued := each.qLen
			each.follow([]byte(stream[fed:end]))
			fed = end
			tp := textproto.NewReader(bufio.NewReader(strings.NewReader(head)))
			tp.ReadLine()
			h, err := tp.ReadMIMEHeader()
			if err != nil {
				return
			}
			_, cl := h["Content-Length"]
			_, te := h["Transfer-Encoding"]
			if each.broken {
				// Not followed from some point on: later requests are
				// refused (fail closed); a head queued before is right.
				if each.qLen == queued+1 {
					if got, _ := each.pop(); got.cl != cl || got.te != te {
						t.Fatalf("request %d (%q): queued cl=%v te=%v, head has cl=%v te=%v", i, head, got.cl, got.te, cl, te)
					}
				}
				return
			}
			if each.qLen != queued+1 {
				t.Fatalf("request %d (%q): %d entries queued for it", i, stream[start:end], each.qLen-queued)
			}
			got, _ := each.pop()
			if got.cl != cl || got.te != te {
				t.Fatalf("request %d (%q): queued cl=%v te=%v, head has cl=%v te=%v", i, head, got.cl, got.te, cl, te)
			}
			if w, ok := whole.pop(); !ok && !whole.broken || ok && w != got {
				t.Fatalf("request %d (%q): fed whole, queued %+v %v; request by request %+v", i, head, w, ok, got)
			}
			if te && (cl || !r.ProtoAtLeast(1, 1)) {
				return // refused: the connection ends
			}
			if each.state != fsHead || each.lines != 0 || each.lineLen != 0 {
				t.Fatalf("request %d (%q): not at a request boundary after it (state %d, %d lines, %d bytes)", i, stream[start:end], each.state, each.lines, each.lineLen)
			}
		}
	})
}

// numLeadingCRorLF is net/http's (server.go).
func numLeadingCRorLF(v []byte) (n int) {
	for _, b := range v {
		if b == '\r' || b == '\n' {
			n++
			continue
		}
		break
	}
	return
}

// TestFramingStreamHugeChunkSizeFailsClosed: a chunk size net/http
// accepts but that does not fit an int64 (or more hex digits than
// net/http takes) stops the follower (every later request refused); it
// never panics.
func TestFramingStreamHugeChunkSizeFailsClosed(t *testing.T) {
	for _, size := range []string{"FFFFFFFFFFFFFFFF", "8000000000000000", "00000000000000001", "1x", ""} {
		var s framingStream
		s.feed([]byte("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + size + "\r\nAAAA\r\n0\r\n\r\n"))
		s.feed([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
		// The chunked request itself was queued before its body (net/http
		// fails its body); what follows must not be.
		if f, ok := s.pop(); !ok || !f.te {
			t.Errorf("chunk size %q: the chunked request got %+v %v", size, f, ok)
		}
		if _, ok := s.pop(); ok {
			t.Errorf("chunk size %q: the stream is still followed", size)
		}
	}
	// A chunk size net/http takes, 16 digits, is followed.
	var s framingStream
	s.feed([]byte("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000004\r\nAAAA\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	for i := range 2 {
		if _, ok := s.pop(); !ok {
			t.Fatalf("request %d not followed", i)
		}
	}
}

// TestFramingStreamNotHTTP1IsNotFollowed: the follower stops at a request
// that is not HTTP/1 (the h2c preface): what follows is not HTTP/1 text.
func TestFramingStreamNotHTTP1IsNotFollowed(t *testing.T) {
	var s framingStream
	s.feed([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + strings.Repeat("GET / HTTP/1.1\r\nHost: a\r\n\r\n", 3)))
	if f, ok := s.pop(); ok {
		t.Fatalf("popped %+v after the h2c preface", f)
	}
}
