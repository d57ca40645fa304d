package proxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAmbiguousFramingIsRefused: on both HTTP/1 loops (h1.Server, and
// net/http's server on an h1.GuardListener), a request with both
// Content-Length and Transfer-Encoding, or an HTTP/1.0 request with
// Transfer-Encoding, is answered 400 and its connection closed, and
// nothing reaches the backend; plain chunked requests and "OPTIONS *"
// still work.
func TestAmbiguousFramingIsRefused(t *testing.T) {
	t.Parallel()
	forBothLoops(t, func(t *testing.T, ls labServer) {
		rec := newRecorder(t, 0)
		l := newLabServer(t, basic("", "", rec.addr()), nil, ls)
		const next = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
		for _, tc := range []struct {
			name  string
			parts []string
		}{
			{"CL and TE", []string{"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + next}},
			{"TE and CL, after a good request", []string{getReq("/ok").wire + "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + next}},
			{"in pieces", []string{"POST /a HTTP/1.1\r\nHost: x\r\nContent-Le", "ngth: 5\r\nTransfer-Enc", "oding: chunked\r\n\r\n0\r\n\r\n" + next}},
			{"HTTP/1.0 TE", []string{"POST /a HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" + next}},
			{"HTTP/1.0 TE and CL", []string{"POST /a HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + next}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := len(rec.requests())
				c, err := net.Dial("tcp", l.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				go func() {
					for i, p := range tc.parts {
						if i > 0 {
							time.Sleep(20 * time.Millisecond)
						}
						io.WriteString(c, p)
					}
				}()
				br := bufio.NewReader(c)
				if strings.HasPrefix(tc.parts[0], "GET /ok") {
					readAnswers(t, br, []pipelined{getReq("/ok")})
					before++
				}
				resp, err := http.ReadResponse(br, &http.Request{Method: "POST"})
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusBadRequest || !resp.Close || !strings.Contains(string(body), "Transfer-Encoding") {
					t.Fatalf("got %d close=%v %q, want 400 and close", resp.StatusCode, resp.Close, body)
				}
				if b, err := br.ReadByte(); err == nil {
					t.Fatalf("connection not closed: read %q", b)
				}
				if seen := rec.requests(); len(seen) != before {
					t.Fatalf("the backend got %q", seen[before:])
				}
			})
		}
		// Chunked alone is forwarded and what follows it is the next
		// request; "OPTIONS *" is answered (by net/http's rules on
		// NET_HTTP) and the connection kept.
		c, err := net.Dial("tcp", l.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		reqs := []pipelined{chunkedReq("/c", "hello"), getReq("/after")}
		io.WriteString(c, reqs[0].wire+reqs[1].wire)
		br := bufio.NewReader(c)
		readAnswers(t, br, reqs)
		io.WriteString(c, "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"+getReq("/last").wire)
		resp, err := http.ReadResponse(br, &http.Request{Method: "OPTIONS"})
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		readAnswers(t, br, []pipelined{getReq("/last")})
	})
}

// TestManyTinyPipelinedRequests: a burst of the smallest requests, all in
// one write, is answered in full on both loops (net/http's guard keeps
// up with everything its read-ahead can hold).
func TestManyTinyPipelinedRequests(t *testing.T) {
	t.Parallel()
	forBothLoops(t, func(t *testing.T, ls labServer) {
		rec := newRecorder(t, 0)
		l := newLabServer(t, basic("", "", rec.addr()), nil, ls)
		c, err := net.Dial("tcp", l.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		reqs := make([]pipelined, 600)
		var b strings.Builder
		for i := range reqs {
			reqs[i] = pipelined{"GET / HTTP/1.1\nHost:x\n\n", "GET / "}
			b.WriteString(reqs[i].wire)
		}
		go io.WriteString(c, b.String())
		readAnswers(t, bufio.NewReader(c), reqs)
		checkSeen(t, rec, reqs)
	})
}
