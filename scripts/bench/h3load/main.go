// Command h3load is a closed-loop HTTP load generator for HTTP/3 (quic-go)
// and HTTP/2 over TLS: -c connections, each with -m concurrent streams
// sending GET -url back to back for -d. It prints one line: requests per
// second, latency percentiles, errors and, with -pid, the CPU time
// (user+sys, from /proc/PID/stat) that process spent per request.
//
//	h3load -proto h3 -c 16 -m 4 -d 10s -cacert ca.pem -pid 1234 https://127.0.0.1:18543/
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's utime and stime
// (100 on Linux for every architecture Go supports).
const clockTicks = 100

type options struct {
	proto    string
	conns    int
	streams  int
	duration time.Duration
	caFile   string
	sni      string
	pid      int
	url      string
}

func main() {
	var o options
	flag.StringVar(&o.proto, "proto", "h3", "h3 (HTTP/3 over QUIC) or h2 (HTTP/2 over TLS)")
	flag.IntVar(&o.conns, "c", 16, "connections")
	flag.IntVar(&o.streams, "m", 4, "concurrent streams (requests in flight) per connection")
	flag.DurationVar(&o.duration, "d", 10*time.Second, "duration")
	flag.StringVar(&o.caFile, "cacert", "", "PEM CA file to trust (default: the system roots)")
	flag.StringVar(&o.sni, "sni", "localhost", "TLS server name")
	flag.IntVar(&o.pid, "pid", 0, "process whose CPU time per request to report (0: none)")
	flag.Parse()
	if flag.NArg() != 1 || (o.proto != "h3" && o.proto != "h2") || o.conns < 1 || o.streams < 1 {
		fmt.Fprintln(os.Stderr, "usage: h3load [-proto h3|h2] [-c N] [-m M] [-d DUR] [-cacert FILE] [-pid PID] URL")
		os.Exit(2)
	}
	o.url = flag.Arg(0)
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "h3load:", err)
		os.Exit(1)
	}
}

// result is what the workers measured.
type result struct {
	lat  []time.Duration
	errs int
	err  error // the first error
}

func run(o options) error {
	tlsCfg := &tls.Config{ServerName: o.sni}
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return fmt.Errorf("-cacert: %w", err)
		}
		tlsCfg.RootCAs = x509.NewCertPool()
		if !tlsCfg.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("-cacert %s: no PEM certificate", o.caFile)
		}
	}
	clients := make([]*http.Client, o.conns)
	for i := range clients {
		clients[i] = newClient(o.proto, tlsCfg)
		// Open the connection before the clock starts.
		if err := get(context.Background(), clients[i], o.url); err != nil {
			return fmt.Errorf("warm-up request: %w", err)
		}
	}
	cpu0, err := cpuTicks(o.pid)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	start := time.Now()
	res := make([]result, o.conns*o.streams)
	var wg sync.WaitGroup
	for i := range res {
		cl := clients[i/o.streams]
		wg.Go(func() { res[i] = worker(ctx, cl, o.url) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, err := cpuTicks(o.pid)
	if err != nil {
		return err
	}
	report(o, res, elapsed, cpu1-cpu0)
	return nil
}

// newClient returns a client with one connection of its own.
func newClient(proto string, tlsCfg *tls.Config) *http.Client {
	if proto == "h3" {
		return &http.Client{Transport: &http3.Transport{TLSClientConfig: tlsCfg.Clone()}}
	}
	var p http.Protocols
	p.SetHTTP2(true)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg.Clone(), Protocols: &p, MaxConnsPerHost: 1}}
}

// worker sends requests back to back until ctx ends.
func worker(ctx context.Context, cl *http.Client, url string) result {
	var r result
	for ctx.Err() == nil {
		t := time.Now()
		err := get(ctx, cl, url)
		switch {
		case err == nil:
			r.lat = append(r.lat, time.Since(t))
		case ctx.Err() == nil:
			r.errs++
			if r.err == nil {
				r.err = err
			}
		}
	}
	return r
}

func get(ctx context.Context, cl *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// report prints the run's line.
func report(o options, res []result, elapsed time.Duration, ticks int64) {
	var lat []time.Duration
	errs := 0
	var first error
	for _, r := range res {
		lat = append(lat, r.lat...)
		errs += r.errs
		if first == nil {
			first = r.err
		}
	}
	slices.Sort(lat)
	pct := func(p float64) string {
		if len(lat) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fms", float64(lat[int(p*float64(len(lat)-1))].Microseconds())/1000)
	}
	rps := float64(len(lat)) / elapsed.Seconds()
	line := fmt.Sprintf("proto=%s c=%d m=%d reqs=%d req/s=%.0f p50=%s p90=%s p99=%s errors=%d",
		o.proto, o.conns, o.streams, len(lat), rps, pct(0.50), pct(0.90), pct(0.99), errs)
	if o.pid != 0 && len(lat) > 0 {
		line += fmt.Sprintf(" cpu_us_per_req=%.1f", float64(ticks)*1e6/clockTicks/float64(len(lat)))
	}
	fmt.Println(line)
	if first != nil {
		fmt.Fprintln(os.Stderr, "first error:", first)
	}
}

// cpuTicks returns utime+stime of pid (all its threads) in clock ticks,
// 0 for pid 0.
func cpuTicks(pid int) (int64, error) {
	if pid == 0 {
		return 0, nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("-pid: %w", err)
	}
	// Fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("-pid: unexpected /proc/PID/stat format")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("-pid: short /proc/PID/stat")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("-pid: %w", err)
	}
	return u + s, nil
}
