// Command cdnorigin is the origin and the miss-storm client of
// scripts/bench/cdn.sh. Stdlib only.
//
// As an origin (the default) it answers
//
//	GET /obj/SIZE/NAME   SIZE bytes ("1k" = 1,024, "1m" = 1,048,576, or
//	                     a number) with Cache-Control: public,
//	                     max-age=3600, an ETag and Last-Modified
//	GET /slow/SIZE/NAME  the same after -delay (a cold key for the storm)
//	GET /_count/PATH     how many requests /PATH has received (text)
//	GET /                "ok" (readiness)
//
// With -storm URL it is the storm: -n clients, each on its own
// connection, wait on one barrier and then send one GET each; it prints
// how many got 200 with the full body, the errors, and the latencies.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18590", "origin: listen address (loopback host:port)")
	delay := flag.Duration("delay", time.Second, "origin: how long /slow/ answers take")
	storm := flag.String("storm", "", "storm: the URL every client asks for once")
	n := flag.Int("n", 1000, "storm: number of clients")
	timeout := flag.Duration("timeout", 30*time.Second, "storm: bound of the whole storm")
	flag.Parse()
	if *storm != "" {
		os.Exit(runStorm(*storm, *n, *timeout))
	}
	runOrigin(*addr, *delay)
}

// origin serves the objects and counts the requests per path.
type origin struct {
	delay  time.Duration
	counts sync.Map // path → *atomic.Int64
	bodies sync.Map // size → []byte
	start  time.Time
}

func (o *origin) count(path string) *atomic.Int64 {
	v, _ := o.counts.LoadOrStore(path, new(atomic.Int64))
	return v.(*atomic.Int64)
}

func (o *origin) body(size int) []byte {
	if v, ok := o.bodies.Load(size); ok {
		return v.([]byte)
	}
	b := make([]byte, size)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	v, _ := o.bodies.LoadOrStore(size, b)
	return v.([]byte)
}

func parseSize(s string) (int, error) {
	switch s {
	case "1k":
		return 1 << 10, nil
	case "1m":
		return 1 << 20, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 64<<20 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n, nil
}

func (o *origin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if rest, ok := strings.CutPrefix(p, "/_count/"); ok {
		fmt.Fprintln(w, o.count("/"+rest).Load())
		return
	}
	if p == "/" {
		_, _ = io.WriteString(w, "ok\n")
		return
	}
	o.count(p).Add(1)
	kind, rest, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	sz, _, _ := strings.Cut(rest, "/")
	size, err := parseSize(sz)
	if (kind != "obj" && kind != "slow") || err != nil {
		http.NotFound(w, r)
		return
	}
	if kind == "slow" {
		select {
		case <-time.After(o.delay):
		case <-r.Context().Done():
			return
		}
	}
	sum := sha256.Sum256([]byte(p))
	h := w.Header()
	h["Content-Type"] = []string{"application/octet-stream"}
	h["Cache-Control"] = []string{"public, max-age=3600"}
	h["Etag"] = []string{`"` + hex.EncodeToString(sum[:8]) + `"`}
	h["Last-Modified"] = []string{o.start.UTC().Format(http.TimeFormat)}
	h["Content-Length"] = []string{strconv.Itoa(size)}
	_, _ = w.Write(o.body(size))
}

func runOrigin(addr string, delay time.Duration) {
	srv := &http.Server{Addr: addr, Handler: &origin{delay: delay, start: time.Now().Add(-time.Hour)},
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Printf("cdnorigin listening on %s (slow delay %s)", addr, delay)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}

// runStorm sends one GET of url from each of n clients at once.
func runStorm(url string, n int, timeout time.Duration) int {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var (
		wg      sync.WaitGroup
		ok      atomic.Int64
		mu      sync.Mutex
		errs    = map[string]int{}
		lat     = make([]time.Duration, 0, n)
		barrier = make(chan struct{})
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each client its own transport: its own connection.
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			<-barrier
			t0 := time.Now()
			msg := ""
			resp, err := c.Do(req)
			if err == nil {
				var nb int64
				nb, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch {
				case err != nil:
				case resp.StatusCode != http.StatusOK:
					msg = "status " + strconv.Itoa(resp.StatusCode)
				case resp.ContentLength >= 0 && nb != resp.ContentLength:
					msg = "short body"
				}
			}
			if err != nil {
				msg = err.Error()
			}
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if msg == "" {
				ok.Add(1)
				lat = append(lat, d)
			} else {
				errs[msg]++
			}
		}()
	}
	t0 := time.Now()
	close(barrier)
	wg.Wait()
	wall := time.Since(t0)
	slices.Sort(lat)
	q := func(f float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(f*float64(len(lat))))]
	}
	fmt.Printf("clients %d ok %d errors %d wall_ms %d p50_ms %d max_ms %d\n", n, ok.Load(), n-int(ok.Load()),
		wall.Milliseconds(), q(0.5).Milliseconds(), q(1).Milliseconds())
	for m, c := range errs {
		fmt.Printf("  error x%d: %s\n", c, m)
	}
	if ok.Load() != int64(n) {
		return 1
	}
	return 0
}
