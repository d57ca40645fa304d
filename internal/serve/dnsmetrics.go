package serve

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwaylb/spillway/internal/gslb"
	"github.com/spillwaylb/spillway/internal/rrl"
)

// dnsKey is one DNS query series. Names outside the zones collapse to
// "", and types and rcodes are numbers, so the set is bounded by the
// config.
type dnsKey struct {
	name   string
	qtype  uint16
	rcode  int
	member string
}

// dnsCounters count queries. A query looks its counter up in a sync.Map
// (no lock once the series exists) and adds to it.
type dnsCounters struct {
	m sync.Map // dnsKey → *atomic.Uint64
}

func (d *dnsCounters) observe(q gslb.Query) {
	switch q.Type {
	case dns.TypeA, dns.TypeAAAA, dns.TypeCNAME, dns.TypeNS, dns.TypeSOA, dns.TypeMX, dns.TypeTXT,
		dns.TypeSRV, dns.TypeCAA, dns.TypePTR, dns.TypeHTTPS, dns.TypeSVCB, dns.TypeANY:
	default:
		q.Type = 0 // any other type: one series, "OTHER"
	}
	k := dnsKey{q.Name, q.Type, q.Rcode, q.Member}
	c, ok := d.m.Load(k)
	if !ok {
		c, _ = d.m.LoadOrStore(k, new(atomic.Uint64))
	}
	c.(*atomic.Uint64).Add(1)
}

// collectDNS emits the DNS query counters and member health.
func (m *metrics) collectDNS(ch chan<- prometheus.Metric) {
	d := m.d
	m.dns.m.Range(func(k, v any) bool {
		key := k.(dnsKey)
		typ, ok := dns.TypeToString[key.qtype]
		if !ok || key.qtype == 0 {
			typ = "OTHER"
		}
		rcode, ok := dns.RcodeToString[key.rcode]
		if !ok {
			rcode = strconv.Itoa(key.rcode)
		}
		ch <- prometheus.MustNewConstMetric(d.descDNSQueries, prometheus.CounterValue, float64(v.(*atomic.Uint64).Load()), key.name, typ, rcode, key.member)
		return true
	})
	srv := m.s.dnsServer()
	if srv == nil {
		return
	}
	for _, h := range srv.Health() {
		v := 0.0
		if h.Healthy {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(d.descDNSHealthy, prometheus.GaugeValue, v, h.Name, h.Member)
	}
	collectRateLimits(ch, d, srv.RateLimitStats())
	m.collectKeys(ch, srv)
}

// collectRateLimits emits the response rate limiting and denial
// signature cap counters, when they are on: a fixed set of series.
func collectRateLimits(ch chan<- prometheus.Metric, d *obsDescs, st gslb.RateLimitStats) {
	if l := st.Limited; l != nil {
		for c := range rrl.NumClasses {
			for _, a := range []rrl.Action{rrl.Slip, rrl.Drop} {
				ch <- prometheus.MustNewConstMetric(d.descDNSLimited, prometheus.CounterValue, float64(l.Limited(c, a)), c.String(), a.String())
			}
		}
		ch <- prometheus.MustNewConstMetric(d.descDNSEvicted, prometheus.CounterValue, float64(l.Evictions()))
	}
	if st.SignatureCap {
		ch <- prometheus.MustNewConstMetric(d.descDNSSigCap, prometheus.CounterValue, float64(st.SignaturesRefusedUDP), "udp")
		ch <- prometheus.MustNewConstMetric(d.descDNSSigCap, prometheus.CounterValue, float64(st.SignaturesRefusedTCP), "tcp")
	}
}
