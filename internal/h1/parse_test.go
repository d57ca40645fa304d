package h1

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/textproto"
	"reflect"
	"strings"
	"testing"
)

var requestHeads = []string{
	"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
	"GET /a/b?x=1&y=%20 HTTP/1.1\r\nHost: h:8080\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n",
	"GET /caf%C3%A9/x%2Fy HTTP/1.1\r\nhost: x\r\nx-lower-case: v\r\nX-UPPER: V\r\n\r\n",
	"GET /(a)!*' HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET /q? HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET //double/slash HTTP/1.1\r\nHost: x\r\n\r\n",
	"DELETE /x HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Close\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nCookie: a=1\r\nCookie: b=2\r\nX-Empty:\r\nX-Pad:  \t v \t \r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-Obs: caf\xc3\xa9\r\n\r\n",
	"GET / HTTP/1.1\r\n\r\n",
	// Declined: net/http's own business or errors.
	"GET / HTTP/1.0\r\nHost: x\r\n\r\n",
	"GET http://example.com/ HTTP/1.1\r\nHost: x\r\n\r\n",
	"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nPragma: no-cache\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-Fold: a\r\n b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost : x\r\n\r\n",
	"GET / HTTP/1.1\nHost: x\n\n",
	"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n",
	"G(T / HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\n",
	"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
}

var responseHeads = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhello",
	"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nset-cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n",
	"HTTP/1.1 200\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok",
	"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 007\r\nX-Obs: \xff\r\n\r\n1234567",
	// Declined.
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
	"HTTP/1.1 200 OK\r\n\r\nuntil close",
	"HTTP/1.1 204 No Content\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
	"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
	"HTTP/1.1  200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok",
}

// tryRequestFast and tryResponseFast run the fast parsers as the server
// and the transport do: only on a whole buffered head.
func tryRequestFast(br *bufio.Reader) *http.Request {
	head, whole := bufferedHead(br)
	if !whole {
		return nil
	}
	return readRequestFast(context.Background(), br, head)
}

func tryResponseFast(br *bufio.Reader, method string) *fastResponse {
	head, whole := bufferedHead(br)
	if !whole {
		return nil
	}
	return readResponseFast(br, head, method)
}

// FuzzRequestHead checks that readRequestFast parses whatever it accepts
// exactly as http.ReadRequest does, and leaves the same bytes behind.
func FuzzRequestHead(f *testing.F) {
	for _, s := range requestHeads {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		br := bufio.NewReaderSize(strings.NewReader(s), 64<<10)
		br.Peek(len(s))
		fast := tryRequestFast(br)
		if fast == nil {
			return
		}
		restFast, _ := io.ReadAll(br)
		br2 := bufio.NewReaderSize(strings.NewReader(s), 64<<10)
		std, err := http.ReadRequest(br2)
		if err != nil {
			t.Fatalf("fast parser accepted what net/http rejects (%v): %q", err, s)
		}
		restStd, _ := io.ReadAll(br2)
		if std.Body != http.NoBody {
			t.Fatalf("fast parser accepted a request with a body: %q", s)
		}
		if fast.Body != http.NoBody || fast.ContentLength != std.ContentLength {
			t.Fatalf("body: fast %v/%d, net/http %v/%d", fast.Body, fast.ContentLength, std.Body, std.ContentLength)
		}
		fast.Body, std.Body = nil, nil
		fast = fast.WithContext(context.TODO())
		std = std.WithContext(context.TODO())
		if !reflect.DeepEqual(fast, std) {
			t.Fatalf("%q:\nfast     %+v\nnet/http %+v\nURL %#v vs %#v", s, fast, std, fast.URL, std.URL)
		}
		if string(restFast) != string(restStd) {
			t.Fatalf("left %q, net/http left %q", restFast, restStd)
		}
	})
}

// FuzzResponseHead does the same for readResponseFast and http.ReadResponse,
// bodies included.
func FuzzResponseHead(f *testing.F) {
	for _, s := range responseHeads {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, head bool) {
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		br := bufio.NewReaderSize(strings.NewReader(s), 64<<10)
		br.Peek(len(s))
		fr := tryResponseFast(br, method)
		if fr == nil {
			return
		}
		fast := &fr.resp
		fastBody, fastErr := io.ReadAll(fast.Body)
		restFast, _ := io.ReadAll(br)
		br2 := bufio.NewReaderSize(strings.NewReader(s), 64<<10)
		std, err := http.ReadResponse(br2, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("fast parser accepted what net/http rejects (%v): %q", err, s)
		}
		stdBody, stdErr := io.ReadAll(std.Body)
		restStd, _ := io.ReadAll(br2)
		if string(fastBody) != string(stdBody) || (fastErr == nil) != (stdErr == nil) {
			t.Fatalf("body %q (%v), net/http %q (%v)", fastBody, fastErr, stdBody, stdErr)
		}
		if string(restFast) != string(restStd) {
			t.Fatalf("left %q, net/http left %q", restFast, restStd)
		}
		fast.Body, std.Body, std.Request = nil, nil, nil
		if !reflect.DeepEqual(fast, std) {
			t.Fatalf("%q:\nfast     %+v\nnet/http %+v", s, fast, std)
		}
	})
}

// The fast parsers take the common shapes (a regression guard: a change
// that makes them decline everything would pass the fuzz tests).
func TestFastParsersAccept(t *testing.T) {
	for i, s := range requestHeads[:10] {
		br := bufio.NewReader(strings.NewReader(s))
		br.Peek(len(s))
		if tryRequestFast(br) == nil {
			t.Errorf("request %d declined: %q", i, s)
		}
	}
	for i, s := range responseHeads[:4] {
		br := bufio.NewReader(strings.NewReader(s))
		br.Peek(len(s))
		if tryResponseFast(br, http.MethodGet) == nil {
			t.Errorf("response %d declined: %q", i, s)
		}
	}
	for i, s := range requestHeads[10:] {
		br := bufio.NewReader(strings.NewReader(s))
		br.Peek(len(s))
		if tryRequestFast(br) != nil {
			t.Errorf("request %d accepted: %q", i+10, s)
		}
	}
	for i, s := range responseHeads[4:] {
		br := bufio.NewReader(strings.NewReader(s))
		br.Peek(len(s))
		if tryResponseFast(br, http.MethodGet) != nil {
			t.Errorf("response %d accepted: %q", i+4, s)
		}
	}
}

func TestIsTokenByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		want := c < 0x80 && ('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0)
		if got := isTokenByte(byte(c)); got != want {
			t.Errorf("isTokenByte(%#x) = %v, want %v", c, got, want)
		}
	}
}

// benchHead parses the same buffered message over and over.
func benchHead(b *testing.B, msg string, parse func(*bufio.Reader) bool) {
	r := strings.NewReader(msg)
	br := bufio.NewReaderSize(r, 4096)
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(msg)
		br.Reset(r)
		br.Peek(len(msg))
		if !parse(br) {
			b.Fatal("declined")
		}
	}
}

func BenchmarkParseRequestHead(b *testing.B) {
	msg := "GET /api/v1/items?id=42 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\nAccept-Encoding: gzip\r\n\r\n"
	benchHead(b, msg, func(br *bufio.Reader) bool { return tryRequestFast(br) != nil })
}

func BenchmarkParseResponseHead(b *testing.B) {
	msg := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 35\r\nDate: Mon, 30 Nov 2026 19:00:00 GMT\r\n\r\n" +
		`{"zone":"eu-west-1a","port":18081}` + "\n"
	benchHead(b, msg, func(br *bufio.Reader) bool { return tryResponseFast(br, http.MethodGet) != nil })
}

// FuzzFramingScan checks framingScan against textproto: for every head
// http.ReadRequest accepts, fed in two pieces, the scan sees
// Content-Length and Transfer-Encoding fields exactly when textproto's
// header block has them.
func FuzzFramingScan(f *testing.F) {
	for _, s := range []string{
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST / HTTP/1.0\nTransfer-Encoding: chunked\n\n",
		"POST / HTTP/1.1\r\nHost: x\r\nX: a\r\n Content-Length: 3\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding-X: chunked\r\ncontent-length: 0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length\r\n\r\n",
	} {
		f.Add(s, 7)
	}
	f.Fuzz(func(t *testing.T, head string, split int) {
		if _, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head))); err != nil {
			return
		}
		tp := textproto.NewReader(bufio.NewReader(strings.NewReader(head)))
		if _, err := tp.ReadLine(); err != nil {
			return
		}
		h, err := tp.ReadMIMEHeader()
		if err != nil {
			return
		}
		_, cl := h["Content-Length"]
		_, te := h["Transfer-Encoding"]
		var s framingScan
		split = min(max(split, 0), len(head))
		s.feed([]byte(head[:split]))
		s.feed([]byte(head[split:]))
		if s.cl != cl || s.te != te {
			t.Fatalf("%q: scan cl=%v te=%v, textproto cl=%v te=%v", head, s.cl, s.te, cl, te)
		}
	})
}
