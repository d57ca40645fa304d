package soak

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
)

// outcome is one well-formed request that did not end in a 2xx with a
// lab body: a 5xx, another status, a bad body or no answer at all.
type outcome struct {
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Proto  string    `json:"proto"`
	Status int       `json:"status,omitempty"`
	Err    string    `json:"error,omitempty"`
	Body   string    `json:"body,omitempty"`
	// Window names the convergence window the request overlapped ("" =
	// none); set by classify.
	Window string `json:"window,omitempty"`
}

// loadGen sends well-formed GETs at a fixed rate from keep-alive
// connections: most workers speak HTTP/1.1 over TLS, every fourth HTTP/2.
type loadGen struct {
	url     string
	rate    float64
	workers int
	h1, h2  *http.Client

	mu        sync.Mutex
	sent, ok  int
	late      int // dispatches that found no free worker for over a second
	statuses  map[int]int
	byProto   map[string]int // sent, by the protocol the answer came in
	bad       []outcome
	latencies []time.Duration
	// slowest are the 5 slowest requests (any outcome).
	slowest []outcome
	// began and ended frame the run: the first dispatch, the last answer.
	began, ended time.Time
}

func newLoadGen(url string, rate float64, workers int) *loadGen {
	mk := func(h2 bool) *http.Client {
		var ps http.Protocols
		if h2 {
			ps.SetHTTP2(true)
		} else {
			ps.SetHTTP1(true)
		}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the soak's own self-signed, rotating certificate
			Protocols:           &ps,
			MaxIdleConnsPerHost: workers,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		}}
	}
	return &loadGen{url: url, rate: rate, workers: workers, h1: mk(false), h2: mk(true), statuses: map[int]int{}, byProto: map[string]int{}}
}

// run sends requests until ctx ends, then waits for those in flight.
func (g *loadGen) run(ctx context.Context) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := range g.workers {
		client, proto := g.h1, "HTTP/1.1"
		if w%4 == 3 {
			client, proto = g.h2, "HTTP/2"
		}
		wg.Go(func() {
			for n := range jobs {
				g.one(client, proto, n)
			}
		})
	}
	interval := time.Duration(float64(time.Second) / g.rate)
	start := time.Now()
	g.mu.Lock()
	g.began = start
	g.mu.Unlock()
	for i := 0; ; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		if ctx.Err() != nil {
			break
		}
		t := time.NewTimer(time.Second)
		select {
		case jobs <- i:
			t.Stop()
		case <-t.C:
			g.mu.Lock()
			g.late++
			g.mu.Unlock()
			select {
			case jobs <- i:
			case <-ctx.Done():
			}
		case <-ctx.Done():
			t.Stop()
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(jobs)
	wg.Wait()
	g.mu.Lock()
	g.ended = time.Now()
	g.mu.Unlock()
}

// one sends request n. It does not use the run's context: stopping the
// load lets requests in flight finish (within the client timeout).
func (g *loadGen) one(client *http.Client, proto string, n int) {
	req, err := http.NewRequest(http.MethodGet, g.url+"?n="+strconv.Itoa(n), nil)
	if err != nil {
		panic(err) // the URL is the soak's own
	}
	o := outcome{Start: time.Now(), Proto: proto}
	resp, err := client.Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if err != nil {
			err = fmt.Errorf("read body: %w", err)
		}
	}
	o.End = time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sent++
	if resp != nil {
		g.byProto[resp.Proto]++
	} else {
		g.byProto[proto+" (no answer)"]++
	}
	g.latencies = append(g.latencies, o.End.Sub(o.Start))
	slow := o
	if resp != nil {
		slow.Status = resp.StatusCode
	}
	if err != nil {
		slow.Err = err.Error()
	}
	g.keepSlow(slow)
	switch {
	case err != nil:
		o.Err = err.Error()
		g.bad = append(g.bad, o)
		return
	case resp.StatusCode/100 == 2:
		var r struct {
			Zone string `json:"zone"`
		}
		if json.Unmarshal(body, &r) == nil && r.Zone != "" {
			g.ok++
			g.statuses[resp.StatusCode]++
			return
		}
		o.Err = "2xx without a lab backend's body"
	}
	g.statuses[resp.StatusCode]++
	o.Status = resp.StatusCode
	o.Body = truncate(string(body), 200)
	g.bad = append(g.bad, o)
}

// keepSlow keeps o if it is among the 5 slowest; g.mu must be held.
func (g *loadGen) keepSlow(o outcome) {
	d := o.End.Sub(o.Start)
	if len(g.slowest) == 5 && d <= g.slowest[4].End.Sub(g.slowest[4].Start) {
		return
	}
	g.slowest = append(g.slowest, o)
	sort.Slice(g.slowest, func(i, j int) bool {
		return g.slowest[i].End.Sub(g.slowest[i].Start) > g.slowest[j].End.Sub(g.slowest[j].Start)
	})
	g.slowest = g.slowest[:min(5, len(g.slowest))]
}

// quantile returns the q-quantile of the latencies (0 if none).
func (g *loadGen) quantile(q float64) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.latencies) == 0 {
		return 0
	}
	sort.Slice(g.latencies, func(i, j int) bool { return g.latencies[i] < g.latencies[j] })
	return g.latencies[min(len(g.latencies)-1, int(q*float64(len(g.latencies))))]
}

func (g *loadGen) closeIdle() {
	g.h1.CloseIdleConnections()
	g.h2.CloseIdleConnections()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
