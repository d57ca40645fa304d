package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a backend that records every request it gets, in order, as
// "METHOD /path body", answers with the same text, and makes /slow…
// paths take a while (long enough for the server's client watch to start).
type recorder struct {
	*backend
	mu   sync.Mutex
	seen []string
}

func newRecorder(t *testing.T, slow time.Duration) *recorder {
	rec := &recorder{}
	rec.backend = newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		line := r.Method + " " + r.URL.Path + " " + string(b)
		rec.mu.Lock()
		rec.seen = append(rec.seen, line)
		rec.mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/slow") {
			time.Sleep(slow)
		}
		io.WriteString(w, line)
	})
	return rec
}

func (rec *recorder) requests() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]string(nil), rec.seen...)
}

// pipelined is one request of a pipeline and what its answer must echo.
type pipelined struct{ wire, echo string }

func getReq(path string) pipelined {
	return pipelined{"GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n", "GET " + path + " "}
}

func postReq(path, body string) pipelined {
	return pipelined{fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body), "POST " + path + " " + body}
}

func chunkedReq(path, body string) pipelined {
	return pipelined{fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", path, len(body), body), "POST " + path + " " + body}
}

// readAnswers reads n responses from br and checks each echoes want[i].
func readAnswers(t *testing.T, br *bufio.Reader, reqs []pipelined) {
	t.Helper()
	for i, p := range reqs {
		method, _, _ := strings.Cut(p.echo, " ")
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("answer %d of %d: %v", i, len(reqs), err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(b) != p.echo {
			t.Fatalf("answer %d of %d: %d %q (%v), want 200 %q", i, len(reqs), resp.StatusCode, b, err, p.echo)
		}
	}
}

// checkSeen checks the backend got exactly reqs, in order.
func checkSeen(t *testing.T, rec *recorder, reqs []pipelined) {
	t.Helper()
	seen := rec.requests()
	for i := range max(len(seen), len(reqs)) {
		switch {
		case i >= len(seen):
			t.Fatalf("backend got %d requests, want %d", len(seen), len(reqs))
		case i >= len(reqs):
			t.Fatalf("backend got an extra request %d: %q", i, seen[i])
		case seen[i] != reqs[i].echo:
			t.Fatalf("backend request %d: %q, want %q", i, seen[i], reqs[i].echo)
		}
	}
}

// TestH1PipelinedBytesSurviveTheClientWatch: with two slow requests in
// flight on one connection, bytes the client sends meanwhile are not lost
// to the one-byte client watch (the second watch used to overwrite the
// byte the first had saved: "GET /third" reached the backend as
// "ET /third", and a chunk size "100" became "00", running the chunk data
// as a request of its own).
func TestH1PipelinedBytesSurviveTheClientWatch(t *testing.T) {
	t.Parallel()
	smuggled := "\r\n\r\nGET /SMUGGLED HTTP/1.1\r\nHost: x\r\n\r\n"
	smuggled += strings.Repeat("z", 256-len(smuggled))
	chunked := chunkedReq("/c", smuggled)
	head, body, _ := strings.Cut(chunked.wire, "\r\n\r\n")
	tests := []struct {
		name         string
		first, later string // written 5 ms apart
		reqs         []pipelined
	}{
		{"request line", getReq("/slow1").wire + getReq("/slow2").wire, getReq("/third").wire,
			[]pipelined{getReq("/slow1"), getReq("/slow2"), getReq("/third")}},
		{"chunk size", getReq("/slow1").wire + getReq("/slow2").wire + head + "\r\n\r\n", body,
			[]pipelined{getReq("/slow1"), getReq("/slow2"), chunked}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder(t, 150*time.Millisecond)
			l := newLab(t, basic("", "", rec.addr()), nil)
			c, err := net.Dial("tcp", l.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			io.WriteString(c, tc.first)
			time.Sleep(5 * time.Millisecond)
			io.WriteString(c, tc.later)
			readAnswers(t, bufio.NewReader(c), tc.reqs)
			checkSeen(t, rec, tc.reqs)
		})
	}
}

// TestMixedPipelineOf300: 300 pipelined GET, POST, chunked POST and slow
// requests, written in bursts while earlier ones are still running, are
// all answered in order, and the backend sees exactly those 300 requests
// in order, on both HTTP/1 loops.
func TestMixedPipelineOf300(t *testing.T) {
	t.Parallel()
	forBothLoops(t, testMixedPipeline)
}

func testMixedPipeline(t *testing.T, ls labServer) {
	rec := newRecorder(t, 15*time.Millisecond)
	l := newLabServer(t, basic("", "", rec.addr()), nil, ls)
	var reqs []pipelined
	for i := range 300 {
		switch i % 5 {
		case 0:
			reqs = append(reqs, getReq(fmt.Sprintf("/g%d", i)))
		case 1:
			reqs = append(reqs, postReq(fmt.Sprintf("/p%d", i), strings.Repeat("p", i)))
		case 2:
			reqs = append(reqs, chunkedReq(fmt.Sprintf("/c%d", i), fmt.Sprintf("%0*d", 100+i, i)))
		default:
			reqs = append(reqs, getReq(fmt.Sprintf("/slow%d", i)))
		}
	}
	c, err := net.Dial("tcp", l.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	errc := make(chan error, 1)
	go func() {
		// Bursts of 1–7 requests, 3 ms apart: each burst lands while a
		// slow request of an earlier one runs with its client watched.
		for i := 0; i < len(reqs); {
			n := min(1+i%7, len(reqs)-i)
			var b strings.Builder
			for _, p := range reqs[i : i+n] {
				b.WriteString(p.wire)
			}
			if _, err := io.WriteString(c, b.String()); err != nil {
				errc <- err
				return
			}
			i += n
			time.Sleep(3 * time.Millisecond)
		}
		errc <- nil
	}()
	readAnswers(t, bufio.NewReader(c), reqs)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	checkSeen(t, rec, reqs)
}
