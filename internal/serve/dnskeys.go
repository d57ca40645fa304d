package serve

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwaylb/spillway/internal/gslb"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

// keyCheckEvery is how often the DNS server's managed DNSSEC keys are
// checked for a due step (a rollover's next phase). Key schedules are
// in hours, so a minute late is nothing.
const keyCheckEvery = time.Minute

// keyTicker asks the loop every keyCheckEvery to advance managed keys.
func (s *Server) keyTicker(ctx context.Context) {
	t := time.NewTicker(keyCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		select {
		case s.events <- event{do: s.rollKeys}:
		case <-ctx.Done():
			return
		}
	}
}

// rollKeys runs on the loop: when a zone's managed keys have a step due,
// it builds the DNS server again from the config in force (which brings
// the keys to now and saves their state: gslb.New) and swaps it in, as
// a reload does for DNS (member state carried, sockets kept). A step
// that fails keeps the running server, its keys unchanged, and is
// retried at the next check.
func (s *Server) rollKeys() {
	g, snap := s.dnsServer(), s.snap.Load()
	if g == nil || snap == nil || !g.KeysDue(s.now()) {
		return
	}
	ng, err := s.newDNS(snap.Plan.Config, snap.Plan)
	if err == nil {
		err = s.dns.Swap(ng)
	}
	if err != nil {
		s.metrics.keyFailures.Add(1)
		s.log.Error("DNSSEC keys: the next key step failed; the zones keep their keys", "err", err)
		return
	}
	s.log.Info("DNSSEC keys: stepped", "zones", len(g.KeyStatus(s.now())))
}

// withKeys returns h with the DNS server's managed keys (a copy; h is
// shared).
func (s *Server) withKeys(h *report.Health) *report.Health {
	g := s.dnsServer()
	if h == nil || g == nil {
		return h
	}
	st := g.KeyStatus(s.now())
	if len(st) == 0 {
		return h
	}
	c := *h
	for _, z := range st {
		kz := report.KeyZone{Zone: z.Zone, NextEvent: z.NextEvent}
		for _, k := range z.Keys {
			kz.Keys = append(kz.Keys, report.Key{Tag: k.Tag, Role: k.Role, File: k.File, Created: k.Created,
				Published: k.Published, Active: k.Active, Retired: k.Retired, Removed: k.Removed, Phase: k.Phase, InDS: k.InDS})
		}
		c.DNSSEC = append(c.DNSSEC, kz)
	}
	return &c
}

// collectKeys emits the managed-key metrics of srv.
func (m *metrics) collectKeys(ch chan<- prometheus.Metric, srv *gslb.Server) {
	d := m.d
	ch <- prometheus.MustNewConstMetric(d.descKeyFail, prometheus.CounterValue, float64(m.keyFailures.Load()))
	for _, z := range srv.KeyStatus(m.s.now()) {
		count := map[[2]string]int{}
		for _, k := range z.Keys {
			count[[2]string{k.Role, k.Phase}]++
		}
		for k, n := range count {
			ch <- prometheus.MustNewConstMetric(d.descKeys, prometheus.GaugeValue, float64(n), z.Zone, k[0], k[1])
		}
		next := 0.0
		if !z.NextEvent.IsZero() {
			next = float64(z.NextEvent.Unix())
		}
		ch <- prometheus.MustNewConstMetric(d.descKeyNext, prometheus.GaugeValue, next, z.Zone)
	}
}
