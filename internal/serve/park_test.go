package serve_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// An idle keep-alive client connection is parked (spillway_connections_parked)
// and carries its next request; with spillway.parkIdleConnections false it
// is not.
func TestIdleConnectionParksUnderServe(t *testing.T) {
	be := startBackend(t, "park")
	for _, park := range []bool{true, false} {
		t.Run(fmt.Sprintf("parkIdleConnections=%v", park), func(t *testing.T) {
			y := oneServiceYAML(be.addr, `{name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}`,
				fmt.Sprintf("spillway: {parkIdleConnections: %v}\n", park))
			s := servetest.Run(t, servetest.Parse(t, y), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
			c, err := net.Dial("tcp", s.FrontendAddr("fe"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(60 * time.Second))
			br := bufio.NewReader(c)
			get := func() {
				t.Helper()
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d", resp.StatusCode)
				}
			}
			get()
			parked := func() float64 {
				return promValue(metricsText(t, s), `spillway_connections_parked{frontend="fe"}`)
			}
			if park {
				waitFor(t, "the idle connection parked", func() bool { return parked() == 1 })
			} else {
				// Parking would happen within 1.5 s (ParkAfter 1 s, looked
				// for every 0.5 s).
				time.Sleep(3 * time.Second)
				if n := parked(); n != 0 {
					t.Fatalf("spillway_connections_parked %v with parking off", n)
				}
			}
			get()
		})
	}
}
