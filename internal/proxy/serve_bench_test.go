package proxy_test

import (
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"github.com/spillwaylb/spillway/internal/proxy"
)

// TestServeForLoadTest runs the proxy as a standalone server for external
// load generators (bench/peers.sh, wrk) when SPILLWAY_PROXY_LISTEN is set,
// with the comma-separated backends of BACKENDS; it returns on SIGTERM or
// SIGINT. Build with `go test -c` and run the binary with
// -test.run TestServeForLoadTest.
func TestServeForLoadTest(t *testing.T) {
	listen := os.Getenv("SPILLWAY_PROXY_LISTEN")
	if listen == "" {
		t.Skip("SPILLWAY_PROXY_LISTEN not set")
	}
	noObserve := func(c *proxy.Config) { c.Observe = nil }
	l := newLab(t, basic("", "", strings.Split(os.Getenv("BACKENDS"), ",")...), nil, noObserve)
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	go l.srv.Serve(ln)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
