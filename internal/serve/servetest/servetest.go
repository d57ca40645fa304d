// Package servetest runs spillway serve's Server in tests: built from a
// config, started, waited for until every listener is bound, and stopped
// (with Run's error checked) when the test ends.
package servetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/serve"
)

// ReadyTimeout bounds the wait for a server's listeners: generous, so a
// loaded machine does not fail a test that waits for no state.
const ReadyTimeout = 30 * time.Second

// Parse parses a YAML config, failing the test on error.
func Parse(t testing.TB, yaml string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, yaml)
	}
	return c
}

// Run builds a Server from c and opts and starts it until the test ends.
func Run(t testing.TB, c *config.Config, opts serve.Options) *serve.Server {
	t.Helper()
	s, err := serve.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	Start(t, s)
	return s
}

// Start runs s until the returned stop is called or the test ends, and
// returns once s is Ready. stop cancels Run, waits for it and reports
// its error; calling it again does nothing.
func Start(t testing.TB, s *serve.Server) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-s.Ready():
	case err := <-done:
		once.Do(func() { cancel() })
		t.Fatalf("server stopped before it was ready: %v", err)
	case <-time.After(ReadyTimeout):
		t.Fatalf("server not ready after %v", ReadyTimeout)
	}
	return stop
}
