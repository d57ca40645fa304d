// Command idleconns opens many idle client connections to an HTTP server
// on loopback and holds them, for measuring what an idle connection costs
// the server (scripts/bench/conns.sh). Each connection sends one GET,
// reads the answer and then stays open and silent: HTTP/1.1 keep-alive,
// or HTTP/2 with prior knowledge (-h2), which is what a browser's idle
// connection looks like to a proxy. Connections come from 127.0.0.1 up to
// 127.0.0.N (-sources) so that many more than one address's ephemeral
// ports can be open. It prints one line when all are open ("open N
// failed M elapsed D"), then holds them until -hold passes or it is sent
// SIGTERM/SIGINT. With -silent a connection sends nothing at all: a client
// that connected and has not sent its first request yet (which the
// server keeps until its header timeout).
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18480", "server `host:port` (loopback only)")
	n := flag.Int("n", 10000, "connections to open")
	h2 := flag.Bool("h2", false, "speak HTTP/2 with prior knowledge (h2c) instead of HTTP/1.1")
	sources := flag.Int("sources", 8, "source addresses 127.0.0.1 .. 127.0.0.N to spread the connections over")
	par := flag.Int("parallel", 64, "connections opened at a time")
	hold := flag.Duration("hold", time.Minute, "how long to hold the connections open")
	silent := flag.Bool("silent", false, "send nothing on the connections (no request; -h2 is ignored)")
	flag.Parse()
	mode := modeH1
	switch {
	case *silent:
		mode = modeSilent
	case *h2:
		mode = modeH2
	}
	if err := run(*addr, *n, mode, *sources, *par, *hold); err != nil {
		fmt.Fprintln(os.Stderr, "idleconns:", err)
		os.Exit(1)
	}
}

// What a connection does once open.
const (
	modeH1     = iota // one HTTP/1.1 GET, then keep-alive
	modeH2            // one GET over HTTP/2 with prior knowledge
	modeSilent        // nothing
)

func run(addr string, n int, mode int, sources, par int, hold time.Duration) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-addr %q: only loopback addresses are allowed", addr)
	}
	if sources < 1 || sources > 250 {
		return fmt.Errorf("-sources %d: want 1 to 250", sources)
	}
	var (
		mu      sync.Mutex
		held    []io.Closer
		failed  atomic.Int64
		lastErr atomic.Value
		next    atomic.Int64
		wg      sync.WaitGroup
	)
	start := time.Now()
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+int(i)%sources))}
				c, err := open(addr, src, mode)
				if err != nil {
					failed.Add(1)
					lastErr.Store(err.Error())
					continue
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("open %d failed %d elapsed %v\n", len(held), failed.Load(), time.Since(start).Round(time.Millisecond))
	if e, ok := lastErr.Load().(string); ok {
		fmt.Fprintln(os.Stderr, "idleconns: last error:", e)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	select {
	case <-ctx.Done():
	case <-time.After(hold):
	}
	for _, c := range held {
		c.Close()
	}
	return nil
}

// open dials addr from src and completes one request on the connection
// (none in modeSilent).
func open(addr string, src *net.TCPAddr, mode int) (io.Closer, error) {
	d := net.Dialer{LocalAddr: src, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	switch mode {
	case modeSilent:
		return c, nil
	case modeH2:
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return openH2(c, addr)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
		c.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		c.Close()
		return nil, fmt.Errorf("GET: %s (close %v)", resp.Status, resp.Close)
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// openH2 runs one GET over an HTTP/2 client connection on c.
func openH2(c net.Conn, addr string) (io.Closer, error) {
	tr := &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(context.Context, string, string, *tls.Config) (net.Conn, error) {
			return nil, errors.New("no dialing")
		},
	}
	cc, err := tr.NewClientConn(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	resp, err := cc.RoundTrip(req)
	if err != nil {
		cc.Close()
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		cc.Close()
		return nil, fmt.Errorf("GET over HTTP/2: %s", resp.Status)
	}
	c.SetDeadline(time.Time{})
	return cc, nil
}
