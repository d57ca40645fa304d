package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/h1"
)

// startGuarded serves h with NewServer on an h1.GuardListener and returns its
// address.
func startGuarded(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, "served:"+r.Method+":"+string(b))
	}), nil)
	go srv.Serve(h1.GuardListener(ln))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// guardedStatuses writes raw on a new connection to addr and returns the
// statuses of the responses read until the connection ends.
func guardedStatuses(t *testing.T, addr, raw string, max int) []int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var codes []int
	for range max {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		io.Copy(io.Discard, resp.Body)
		codes = append(codes, resp.StatusCode)
		if resp.Close {
			break
		}
	}
	return codes
}

const ambiguousReq = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHELLO\r\n0\r\n\r\n"

// TestGuardRefusesAmbiguousAfterCRLFAfterPost: net/http discards up to 4
// CR/LF bytes after a POST; the guard must not take them for a request
// head (a phantom entry the next, ambiguous, request would take).
func TestGuardRefusesAmbiguousAfterCRLFAfterPost(t *testing.T) {
	addr := startGuarded(t)
	codes := guardedStatuses(t, addr, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx\r\n\r\n"+ambiguousReq, 3)
	if len(codes) != 2 || codes[0] != 200 || codes[1] != 400 {
		t.Fatalf("statuses %v, want [200 400]", codes)
	}
	// Benign: CRLF after a POST, then a plain request, is served.
	codes = guardedStatuses(t, addr, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 3)
	if len(codes) != 2 || codes[0] != 200 || codes[1] != 200 {
		t.Fatalf("statuses %v, want [200 200]", codes)
	}
}

// TestGuardRefusesAmbiguousAfterLongContentLength: net/http accepts a
// Content-Length with any number of leading zeros; the guard must read
// that body as a body, not as request heads.
func TestGuardRefusesAmbiguousAfterLongContentLength(t *testing.T) {
	addr := startGuarded(t)
	body := "X\r\n\r\n" // a phantom head if read as one
	codes := guardedStatuses(t, addr, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0000000000000000005\r\n\r\n"+body+ambiguousReq, 3)
	if len(codes) != 2 || codes[0] != 200 || codes[1] != 400 {
		t.Fatalf("statuses %v, want [200 400]", codes)
	}
}

// TestGuardSurvivesH2CPriorKnowledgeFrames: HTTP/2 frames after the h2c
// preface are not followed as HTTP/1 text (a frame payload looking like a
// head with a huge chunk size used to panic net/http's frame reader
// goroutine, killing the process), and the connection is served.
func TestGuardSurvivesH2CPriorKnowledgeFrames(t *testing.T) {
	addr := startGuarded(t)
	payload := "\nX\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\nAAAA"
	frame := []byte{0, 0, byte(len(payload)), 0xFE, 0, 0, 0, 0, 0}
	ping := []byte{0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}
	msg := "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + string([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0}) + string(frame) + payload + string(ping)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	// The server reads the frames in order: its PING ack means it has
	// read the one before.
	acked := false
	for range 20 {
		var h [9]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			t.Fatalf("reading the server's frames: %v", err)
		}
		if _, err := io.CopyN(io.Discard, c, int64(h[0])<<16|int64(h[1])<<8|int64(h[2])); err != nil {
			t.Fatal(err)
		}
		if h[3] == 6 && h[4]&1 != 0 {
			acked = true
			break
		}
	}
	if !acked {
		t.Fatal("no PING ack")
	}
	// Still alive and serving.
	if codes := guardedStatuses(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 1); len(codes) != 1 || codes[0] != 200 {
		t.Fatalf("statuses %v after the h2c connection, want [200]", codes)
	}
}
