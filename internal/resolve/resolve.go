// Package resolve turns the DNS names of INTERNET_FQDN_PORT endpoints and
// serverless base URLs into addresses, respecting the answers' TTLs: a
// Cache resolves each name again when its TTL (clamped to a floor and a
// ceiling) runs out, keeps the last good addresses when a lookup fails,
// and reports each name's state for get-health.
//
// Lookups go through the Resolver interface; DNS, the real one, asks one
// configured server with miekg/dns's client (net.Resolver does not expose
// TTLs, so it cannot respect them).
package resolve

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Answer is one successful lookup: every A and AAAA address, and the
// smallest TTL among them.
type Answer struct {
	Addrs []netip.Addr
	TTL   time.Duration
}

// Resolver looks a name up.
type Resolver interface {
	Lookup(ctx context.Context, name string) (Answer, error)
}

// DNS is a Resolver asking Server (host:port) over UDP, then TCP when the
// answer is truncated, for A and AAAA records.
type DNS struct {
	Server  string
	Timeout time.Duration // per query; default 2 s
}

// DefaultServer returns the first nameserver of /etc/resolv.conf
// (127.0.0.1:53 when it cannot be read).
func DefaultServer() string {
	cc, err := dns.ClientConfigFromFile("/etc/resolv.conf")
	if err != nil || len(cc.Servers) == 0 {
		return "127.0.0.1:53"
	}
	return cc.Servers[0] + ":" + cc.Port
}

// Lookup implements Resolver.
func (d DNS) Lookup(ctx context.Context, name string) (Answer, error) {
	var ans Answer
	var errs []error
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
		addrs, ttl, err := d.query(ctx, name, qt)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(addrs) > 0 && (ans.TTL == 0 || ttl < ans.TTL) {
			ans.TTL = ttl
		}
		ans.Addrs = append(ans.Addrs, addrs...)
	}
	if len(ans.Addrs) == 0 {
		if len(errs) == 0 {
			errs = append(errs, fmt.Errorf("%s: no A or AAAA records", name))
		}
		return Answer{}, errors.Join(errs...)
	}
	slices.SortFunc(ans.Addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	return ans, nil
}

// query asks one question.
func (d DNS) query(ctx context.Context, name string, qt uint16) ([]netip.Addr, time.Duration, error) {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qt)
	c := &dns.Client{Timeout: timeout}
	r, _, err := c.ExchangeContext(ctx, m, d.Server)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, _, err = c.ExchangeContext(ctx, m, d.Server)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s via %s: %w", name, dns.TypeToString[qt], d.Server, err)
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, 0, fmt.Errorf("%s %s via %s: %s", name, dns.TypeToString[qt], d.Server, dns.RcodeToString[r.Rcode])
	}
	var out []netip.Addr
	var ttl uint32
	for _, rr := range r.Answer {
		var a netip.Addr
		switch v := rr.(type) {
		case *dns.A:
			a, _ = netip.AddrFromSlice(v.A.To4())
		case *dns.AAAA:
			a, _ = netip.AddrFromSlice(v.AAAA)
		default:
			continue // CNAMEs: the server gives the target's records too
		}
		if len(out) == 0 || rr.Header().Ttl < ttl {
			ttl = rr.Header().Ttl
		}
		out = append(out, a.Unmap())
	}
	return out, time.Duration(ttl) * time.Second, nil
}

// Status is one name's state, for get-health.
type Status struct {
	Name string `json:"name"`
	// Addrs are the addresses in use: the last good answer's.
	Addrs []string `json:"addresses"`
	// TTL is the last good answer's TTL; Next when the name is resolved
	// again.
	TTL  time.Duration `json:"ttl"`
	Next time.Time     `json:"next"`
	// Resolved is when Addrs were received; Error and Failures describe
	// the lookups that failed since (Addrs are kept meanwhile).
	Resolved time.Time `json:"resolved,omitzero"`
	Error    string    `json:"error,omitempty"`
	Failures int       `json:"failures,omitempty"`
}

// entry is a Cache's record of one name.
type entry struct {
	addrs    []netip.Addr
	ttl      time.Duration
	next     time.Time
	resolved time.Time
	err      string
	failures int
}

// Cache keeps the names' addresses fresh. It is safe for concurrent use.
type Cache struct {
	r        Resolver
	now      func() time.Time
	min, max time.Duration

	mu    sync.Mutex
	names map[string]*entry
}

// NewCache returns a Cache resolving through r, with answers' TTLs
// clamped to [min, max] and now as its clock.
func NewCache(r Resolver, min, max time.Duration, now func() time.Time) *Cache {
	return &Cache{r: r, now: now, min: min, max: max, names: map[string]*entry{}}
}

// SetNames replaces the set of names kept fresh; names already known
// keep their state, new ones are due at once.
func (c *Cache) SetNames(names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := map[string]*entry{}
	for _, n := range names {
		if e, ok := c.names[n]; ok {
			keep[n] = e
		} else {
			keep[n] = &entry{}
		}
	}
	c.names = keep
}

// Refresh looks up every name whose TTL has run out and reports whether
// any name's addresses changed. Lookups run without the lock held.
func (c *Cache) Refresh(ctx context.Context) bool {
	now := c.now()
	c.mu.Lock()
	var due []string
	for n, e := range c.names {
		if !now.Before(e.next) {
			due = append(due, n)
		}
	}
	c.mu.Unlock()
	slices.Sort(due)
	changed := false
	for _, n := range due {
		ans, err := c.r.Lookup(ctx, n)
		if ctx.Err() != nil {
			return changed
		}
		if c.record(n, ans, err) {
			changed = true
		}
	}
	return changed
}

// record stores one lookup's outcome; it reports an address change.
func (c *Cache) record(name string, ans Answer, err error) bool {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.names[name]
	if !ok {
		return false // dropped by SetNames meanwhile
	}
	if err != nil {
		e.err, e.failures = err.Error(), e.failures+1
		e.next = now.Add(c.min)
		return false
	}
	ttl := min(max(ans.TTL, c.min), c.max)
	changed := !slices.Equal(e.addrs, ans.Addrs)
	e.addrs, e.ttl, e.resolved, e.next, e.err, e.failures = ans.Addrs, ans.TTL, now, now.Add(ttl), "", 0
	return changed
}

// Resolved returns the addresses in use, by name.
func (c *Cache) Resolved() map[string][]netip.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string][]netip.Addr, len(c.names))
	for n, e := range c.names {
		out[n] = slices.Clone(e.addrs)
	}
	return out
}

// Status returns every name's state, sorted by name.
func (c *Cache) Status() []Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Status, 0, len(c.names))
	for n, e := range c.names {
		st := Status{Name: n, TTL: e.ttl, Next: e.next, Resolved: e.resolved, Error: e.err, Failures: e.failures, Addrs: []string{}}
		for _, a := range e.addrs {
			st.Addrs = append(st.Addrs, a.String())
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Status) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}
