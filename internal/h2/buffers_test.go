package h2

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// pooled reports whether a frame reader and a write set are in the
// server's pools (and leaves them there).
func (s *Server) pooled() bool {
	r, w := s.bufs.readers.Get(), s.bufs.writers.Get()
	if r != nil {
		s.bufs.readers.Put(r)
	}
	if w != nil {
		s.bufs.writers.Put(w)
	}
	return r != nil && w != nil
}

// An idle connection gives its read and write buffers back between
// requests; bodies larger than the buffers, in frames larger than
// bigReadFrame (the read Framer is replaced), still arrive whole both
// ways.
func TestIdleConnectionGivesBuffersBack(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	// pooled looks into the pools, which a collection empties (what two
	// in a row found unused): none while this test runs.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// One P: a pool's per-P private slot is not visible from another P.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s := &Server{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		sum := sha256.Sum256(b)
		n := len(b)
		if r.URL.Path == "/big" {
			w.Write(bytes.Repeat([]byte("r"), 100<<10))
		}
		fmt.Fprintf(w, " %d %x", n, sum[:4])
	})
	client, base := startH2C(t, s, h)
	do := func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), method, base+path, strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.ProtoMajor != 2 {
			t.Fatalf("%s %s: %v over %s", method, path, err, resp.Proto)
		}
		return string(b)
	}
	waitPooled := func() {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !s.pooled(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("the idle connection still holds its buffers")
			}
		}
	}
	if got := do("GET", "/a", ""); got != " 0 e3b0c442" {
		t.Fatalf("GET /a: %q", got)
	}
	waitPooled()
	body := strings.Repeat("0123456789abcdef", 5<<10) // 80 KiB
	sum := sha256.Sum256([]byte(body))
	want := strings.Repeat("r", 100<<10) + fmt.Sprintf(" %d %x", len(body), sum[:4])
	for i := range 3 {
		if got := do("POST", "/big", body); got != want {
			t.Fatalf("POST /big #%d: %d bytes, tail %q", i, len(got), got[max(0, len(got)-20):])
		}
		waitPooled()
	}
}
