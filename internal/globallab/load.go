//go:build linux

package globallab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/netlab"
)

// requestTimeout bounds each timeline request (a new connection each).
const requestTimeout = time.Second

// client sends requests from one client namespace.
type client struct {
	site *Site
	dial *netlab.Dialer
	// fresh opens a connection per request (a new client each time, so
	// routing decides anew); pooled keeps connections (the waterfall).
	fresh, pooled *http.Client
}

func newClient(s *Site) *client {
	d := &netlab.Dialer{NS: s.Client}
	d.Timeout = 2 * time.Second
	fresh := &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}
	pooled := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	return &client{
		site:   s,
		dial:   d,
		fresh:  &http.Client{Transport: fresh, Timeout: requestTimeout},
		pooled: &http.Client{Transport: pooled, Timeout: 3 * time.Second},
	}
}

func (c *client) close() {
	c.fresh.CloseIdleConnections()
	c.pooled.CloseIdleConnections()
}

// answer is one request's outcome.
type answer struct {
	// At is when it was sent, from the start of its run.
	At      time.Duration
	Status  int
	Err     error
	Latency time.Duration
	// Edge is the site whose edge answered (its X-Lab-Edge header), Zone
	// the backend's zone, and Hops the proxies the answer came through
	// (its Via header's entries: 2 through both layers).
	Edge, Zone string
	Hops       int
}

// OK reports a 200 from a backend.
func (a answer) OK() bool { return a.Err == nil && a.Status == http.StatusOK && a.Zone != "" }

// Region is the region of the zone that answered.
func (a answer) Region() string {
	if i := strings.LastIndexByte(a.Zone, '-'); i > 0 {
		return a.Zone[:i]
	}
	return ""
}

// get sends GET url and reads the backend's answer.
func get(ctx context.Context, hc *http.Client, url string) answer {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return answer{Err: err}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return answer{Err: err, Latency: time.Since(start)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	a := answer{Status: resp.StatusCode, Err: err, Latency: time.Since(start),
		Edge: resp.Header.Get("X-Lab-Edge"), Hops: len(strings.Split(resp.Header.Get("Via"), ","))}
	if resp.StatusCode == http.StatusOK {
		var r struct {
			Zone string `json:"zone"`
		}
		if json.Unmarshal(body, &r) == nil {
			a.Zone = r.Zone
		}
	}
	return a
}

// handshake returns the median TCP handshake time to addr over n tries.
func (c *client) handshake(ctx context.Context, addr string, n int) (time.Duration, error) {
	var ts []time.Duration
	for range n {
		start := time.Now()
		conn, err := c.dial.DialContext(ctx, "tcp", addr)
		if err != nil {
			return 0, fmt.Errorf("%s client → %s: %w", c.site.City, addr, err)
		}
		ts = append(ts, time.Since(start))
		conn.Close()
	}
	return median(ts), nil
}

// reach dials addr until a connection opens, for up to limit.
func (c *client) reach(ctx context.Context, addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		conn, err := c.dial.DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s client → %s: %w after %s", c.site.City, addr, err, limit)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// paced sends requests at rate per second, each with send, until limit
// has passed or stop is closed (nil: never), at most maxInFlight at once
// (more are counted as failed, not queued), and returns the answers in
// the order sent.
func paced(ctx context.Context, rate float64, stop <-chan struct{}, limit time.Duration, send func(ctx context.Context) answer) []answer {
	var (
		mu  sync.Mutex
		out []answer
		wg  sync.WaitGroup
	)
	sem := make(chan struct{}, maxInFlight)
	start := time.Now()
	for i := 0; ; i++ {
		at := time.Duration(float64(i) / rate * float64(time.Second))
		if at >= limit || sleep(ctx, time.Until(start.Add(at))) != nil || closed(stop) {
			break
		}
		mu.Lock()
		out = append(out, answer{At: at})
		mu.Unlock()
		select {
		case sem <- struct{}{}:
		default:
			mu.Lock()
			out[i].Err = fmt.Errorf("more than %d requests in flight", maxInFlight)
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			a := send(ctx)
			a.At = at
			mu.Lock()
			out[i] = a
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// closed reports whether c is closed (false for nil).
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

const maxInFlight = 256

// query asks the GSLB for name's A record from c's namespace, with ECS
// subnet ecs ("" for none), and returns the addresses answered.
func (c *client) query(ctx context.Context, server, name, ecs string) ([]string, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	if ecs != "" {
		pfx, err := netip.ParsePrefix(ecs)
		if err != nil {
			return nil, err
		}
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.SetUDPSize(1232)
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1,
			SourceNetmask: uint8(pfx.Bits()), Address: pfx.Addr().AsSlice()})
		m.Extra = append(m.Extra, o)
	}
	conn, err := c.dial.DialContext(ctx, "udp", net.JoinHostPort(server, "53"))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	co := &dns.Conn{Conn: conn}
	if err := co.WriteMsg(m); err != nil {
		return nil, err
	}
	r, err := co.ReadMsg()
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%s: %s", name, dns.RcodeToString[r.Rcode])
	}
	var addrs []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			addrs = append(addrs, a.A.String())
		}
	}
	return addrs, nil
}

// median of ts (0 for none); ts is sorted in place.
func median(ts []time.Duration) time.Duration {
	if len(ts) == 0 {
		return 0
	}
	slices.Sort(ts)
	return ts[len(ts)/2]
}
