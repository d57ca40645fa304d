package h1_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/h1"
)

// A goroutine that is not scheduled for longer than the probe interval
// (100 ms) between arming its connection's deadline and writing the
// request (a CPU-starved machine) must not turn into a backend timeout:
// the probe deadline only says when to start watching the context, the
// backend has not even been asked yet. Seen as one 504 backend_timeout
// in 10,337 requests of TestReloadEverySecondUnderLoadLosesNothing on a
// loaded 2-core machine. The clock lags by a second to model the pause
// deterministically, on a fresh and on a pooled connection.
func TestStarvedBeforeSendIsNoTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	tr := h1.NewTransport(nil)
	ctx, cancel := context.WithCancel(context.Background()) // watched: the probe deadline is armed
	defer cancel()
	get := func(what string) {
		t.Helper()
		d := time.Now().Add(30 * time.Second)
		resp, err := tr.Do(ctx, &h1.Request{Method: "GET", Addr: ln.Addr().String(), Host: "x", Path: "/"}, d, d)
		if err != nil {
			t.Fatalf("%s: %v (the backend was never asked: not a timeout)", what, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Fatalf("%s: %d %q", what, resp.StatusCode, body)
		}
	}
	get("warm-up, clock right") // leaves a pooled connection
	h1.SetClock(tr, func() time.Time { return time.Now().Add(-time.Second) })
	get("pooled connection, clock a second behind")
	get("again")
}
