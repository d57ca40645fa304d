package gslb

import (
	"context"
	"time"

	"github.com/miekg/dns"
)

// NOTIFY (RFC 1996) retries: notifyTries messages at most, each waiting
// notifyTimeout for the acknowledgement, with pauses doubling from
// notifyPause in between.
const (
	notifyTries   = 5
	notifyTimeout = 2 * time.Second
	notifyPause   = time.Second
)

// carrySerials remembers the SOA serials of old, the generation s
// replaces, so that s notifies secondaries only of zones whose serial
// changed.
func (s *Server) carrySerials(old *Server) {
	serials := make(map[string]uint32, len(old.zones))
	for origin, z := range old.zones {
		serials[origin] = z.nodes[origin].rrsets[dns.TypeSOA][0].(*dns.SOA).Serial
	}
	s.mu.Lock()
	s.prevSerials = serials
	s.mu.Unlock()
}

// notifyAll sends NOTIFY for every zone with notify targets whose serial
// differs from the replaced generation's (every such zone at a fresh
// start), one goroutine per target, and returns when they are done or
// ctx is.
func (s *Server) notifyAll(ctx context.Context) {
	s.mu.Lock()
	prev := s.prevSerials
	s.mu.Unlock()
	done := make(chan struct{})
	n := 0
	for origin, z := range s.zones {
		x := z.xfr
		if x == nil || len(x.notify) == 0 {
			continue
		}
		if serial, ok := prev[origin]; ok && serial == x.soa.Serial {
			continue
		}
		for _, to := range x.notify {
			n++
			go func() {
				defer func() { done <- struct{}{} }()
				s.notify(ctx, z, to.String())
			}()
		}
	}
	for range n {
		<-done
	}
}

// notify tells the secondary at addr of zone z's serial over UDP, signed
// with the zone's first TSIG key if it has keys, until it acknowledges
// or the retries run out.
func (s *Server) notify(ctx context.Context, z *zone, addr string) {
	x := z.xfr
	c := &dns.Client{Net: "udp", Timeout: notifyTimeout, TsigProvider: s.tsig}
	pause := notifyPause
	for try := 1; ; try++ {
		m := new(dns.Msg)
		m.SetNotify(z.origin)
		m.Answer = []dns.RR{x.soa}
		if x.notifyKey != "" {
			m.SetTsig(x.notifyKey, x.notifyAlg, 300, time.Now().Unix())
		}
		r, _, err := c.ExchangeContext(ctx, m, addr)
		if err == nil {
			s.log.Info("gslb: NOTIFY acknowledged", "zone", z.origin, "serial", x.soa.Serial, "secondary", addr, "rcode", dns.RcodeToString[r.Rcode])
			return
		}
		if ctx.Err() != nil {
			return
		}
		if try == notifyTries {
			s.log.Warn("gslb: NOTIFY not acknowledged", "zone", z.origin, "serial", x.soa.Serial, "secondary", addr, "tries", try, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause *= 2
	}
}
