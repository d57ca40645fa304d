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

// FuzzFramingStream checks framingStream against net/http: for a stream
// of pipelined requests, each request http.ReadRequest reads (its body
// read to the end) gets the next queued head, whose Content-Length and
// Transfer-Encoding flags are those of its raw head (per textproto), up
// to the first request the guard refuses.
func FuzzFramingStream(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\nPOST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /n HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: v\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\nHost: x\nContent-Length: 5\n\nhelloPOST / HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\n\n5\r\nGET /\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		f.Add(s, 13)
	}
	f.Fuzz(func(t *testing.T, stream string, split int) {
		var st framingStream
		split = min(max(split, 0), len(stream))
		st.feed([]byte(stream[:split]))
		st.feed([]byte(stream[split:]))
		cr := &countingReader{r: strings.NewReader(stream)}
		br := bufio.NewReader(cr)
		for i := 0; ; i++ {
			start := cr.n - br.Buffered()
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			head := stream[start : cr.n-br.Buffered()]
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				return
			}
			tp := textproto.NewReader(bufio.NewReader(strings.NewReader(head)))
			tp.ReadLine()
			h, err := tp.ReadMIMEHeader()
			if err != nil {
				return
			}
			_, cl := h["Content-Length"]
			_, te := h["Transfer-Encoding"]
			got, ok := st.pop()
			if !ok && st.broken {
				return // not followed: refused (fail closed)
			}
			if !ok {
				t.Fatalf("request %d (%q): nothing queued", i, head)
			}
			if got.cl != cl || got.te != te {
				t.Fatalf("request %d (%q): queued cl=%v te=%v, head has cl=%v te=%v", i, head, got.cl, got.te, cl, te)
			}
			if te && (cl || !r.ProtoAtLeast(1, 1)) {
				return // refused: the connection ends
			}
		}
	})
}
