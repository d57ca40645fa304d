package h1

import (
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// pooled reports whether a buffer set is in the server's pool (and
// leaves it there).
func (s *Server) pooled() bool {
	set := s.bufs.sets.Get()
	if set != nil {
		s.bufs.sets.Put(set)
	}
	return set != nil
}

// A cleartext keep-alive connection gives its buffers back while it waits
// for its next request, and a request that then arrives in pieces, one
// larger than a chunk, and pipelined requests are still read whole.
func TestIdleConnectionGivesBuffersBack(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	// pooled looks into the pool, which a collection empties (what two
	// in a row found unused): none while this test runs.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	s := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, r.URL.Path+" "+r.Header.Get("X-Pad")[:min(3, len(r.Header.Get("X-Pad")))]+" "+string(b))
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	c, br := dialKeepAlive(t, ln.Addr().String())
	expect := func(want string) {
		t.Helper()
		expectBody(t, br, want)
	}
	// The only connection's set is in the pool: it was given back.
	waitPooled := func() {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !s.pooled(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("the idle connection still holds its buffers")
			}
		}
	}
	io.WriteString(c, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
	expect("/a  ")
	waitPooled()

	pad := strings.Repeat("p", 3*h1ReadBuf/2) // the head outgrows one chunk
	io.WriteString(c, "POST /b HTTP/1.1\r\nHost: x\r\nX-Pad: "+pad[:h1ReadBuf/2])
	time.Sleep(20 * time.Millisecond)
	io.WriteString(c, pad[h1ReadBuf/2:]+"\r\nContent-Length: 4\r\n\r\nbody")
	expect("/b ppp body")
	waitPooled()

	io.WriteString(c, "GET /c HTTP/1.1\r\nHost: x\r\n\r\nGET /d HTTP/1.1\r\nHost: x\r\n\r\n")
	expect("/c  ")
	expect("/d  ")
	waitPooled()
}
