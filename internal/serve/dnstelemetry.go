package serve

import (
	"log/slog"
	"net/netip"
	"os"
	"strconv"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/gslb"
	"github.com/spillwaylb/spillway/internal/serve/accesslog"
	"github.com/spillwaylb/spillway/internal/serve/dnstapout"
)

// dnsTelemetry is the DNS server's telemetry (docs/dns.md "Telemetry"):
// the counters every generation adds to (gslb.Stats), and the gslb.Tap
// of every generation, which feeds the query log (the access log's
// writer) and dnstap. It outlives generations.
type dnsTelemetry struct {
	stats *gslb.Stats
	alog  *accesslog.Log
	tap   *dnstapout.Tap
	d     dnsTelemetryDescs
}

// dnsTelemetryDescs are the descriptors of its metrics.
type dnsTelemetryDescs struct {
	responses, sigCache, logLines, logDropped, tapSent, tapDropped *prometheus.Desc
}

func newDNSTelemetry(alog *accesslog.Log, log *slog.Logger) *dnsTelemetry {
	host, err := os.Hostname()
	if err != nil {
		host = "spillway"
	}
	return &dnsTelemetry{
		stats: gslb.NewStats(),
		alog:  alog,
		tap:   dnstapout.New(log, host),
		d: dnsTelemetryDescs{
			responses:  prometheus.NewDesc("spillway_dns_responses_total", "DNS queries answered, by zone (a configured zone's origin, else other), query type (A, AAAA, CNAME, MX, TXT, NS, SOA, SRV, CAA, DNSKEY, DS, ANY, other), response code and transport (udp, tcp).", []string{"zone", "qtype", "rcode", "transport"}, nil),
			sigCache:   prometheus.NewDesc("spillway_dns_signature_cache_total", "RRSIGs online signing took from the signature cache (hit) or made (miss).", []string{"result"}, nil),
			logLines:   prometheus.NewDesc("spillway_dns_query_log_lines_total", "DNS query log lines written (spillway.dnsQueryLog).", nil, nil),
			logDropped: prometheus.NewDesc("spillway_dns_query_log_dropped_total", "DNS query log lines dropped because the writer's queue was full.", nil, nil),
			tapSent:    prometheus.NewDesc("spillway_dnstap_queued_total", "Answered queries queued for the dnstap writer (each becomes an AUTH_QUERY and an AUTH_RESPONSE message).", nil, nil),
			tapDropped: prometheus.NewDesc("spillway_dnstap_dropped_total", "Answered queries not sent to dnstap because its queue was full (spillway.dnstap.bufferSize).", nil, nil),
		},
	}
}

// configure applies config c to the dnstap writer (the query log
// follows the access log's Configure).
func (t *dnsTelemetry) configure(c *config.Config) error { return t.tap.Configure(c) }

// descs lists the descriptors, for Describe.
func (t *dnsTelemetry) descs() []*prometheus.Desc {
	d := &t.d
	return []*prometheus.Desc{d.responses, d.sigCache, d.logLines, d.logDropped, d.tapSent, d.tapDropped}
}

// collect emits the metrics.
func (t *dnsTelemetry) collect(ch chan<- prometheus.Metric) {
	d := &t.d
	t.stats.Each(func(zone string, q, r, tr int, n uint64) {
		ch <- prometheus.MustNewConstMetric(d.responses, prometheus.CounterValue, float64(n), zone, gslb.QtypeLabel(q), gslb.RcodeLabel(r), gslb.TransportLabel(tr))
	})
	hits, misses := t.stats.SignatureCache()
	ch <- prometheus.MustNewConstMetric(d.sigCache, prometheus.CounterValue, float64(hits), "hit")
	ch <- prometheus.MustNewConstMetric(d.sigCache, prometheus.CounterValue, float64(misses), "miss")
	lc := t.alog.DNSCounts()
	ch <- prometheus.MustNewConstMetric(d.logLines, prometheus.CounterValue, float64(lc.Written))
	ch <- prometheus.MustNewConstMetric(d.logDropped, prometheus.CounterValue, float64(lc.Dropped))
	tc := t.tap.Counts()
	ch <- prometheus.MustNewConstMetric(d.tapSent, prometheus.CounterValue, float64(tc.Sent))
	ch <- prometheus.MustNewConstMetric(d.tapDropped, prometheus.CounterValue, float64(tc.Dropped))
}

// Want implements gslb.Tap: every query while dnstap is on, else the
// query log's sample. It runs on the answer path.
func (t *dnsTelemetry) Want() bool { return t.tap.On() || t.alog.DNSSampled() }

// Tapped implements gslb.Tap. With dnstap off, Want drew the query log's
// sample; with it on, the draw is made here.
func (t *dnsTelemetry) Tapped(e *gslb.Exchange) {
	if t.tap.On() {
		t.tap.Send(&dnstapout.Exchange{Start: e.Start, Latency: e.Latency, Client: e.Client, TCP: e.TCP, Query: e.Query, Response: e.Response, Zone: e.Zone})
		if !t.alog.DNSSampled() {
			return
		}
	}
	var le accesslog.DNSEntry
	fillDNSEntry(&le, e)
	t.alog.RecordDNS(&le)
}

// fillDNSEntry sets the query log line of exchange e, unpacking its
// wire messages (sampled queries only).
func fillDNSEntry(le *accesslog.DNSEntry, e *gslb.Exchange) {
	*le = accesslog.DNSEntry{Time: e.Start, Latency: e.Latency, Client: e.Client, TCP: e.TCP, Zone: e.Zone, Member: e.Member}
	var r dns.Msg
	if r.Unpack(e.Query) == nil && len(r.Question) > 0 {
		le.Name = r.Question[0].Name
		le.Type = dns.Type(r.Question[0].Qtype).String()
		le.ECS = requestECS(&r)
	}
	var m dns.Msg
	if e.Response == nil || m.Unpack(e.Response) != nil {
		le.Rcode = "none" // dropped by rate limiting, or not packed
		return
	}
	if le.Rcode = dns.RcodeToString[m.Rcode]; le.Rcode == "" {
		le.Rcode = strconv.Itoa(m.Rcode)
	}
	for _, rr := range m.Answer {
		if le.NAnswers == accesslog.MaxDNSAnswers {
			break
		}
		var a netip.Addr
		switch rr := rr.(type) {
		case *dns.A:
			a, _ = netip.AddrFromSlice(rr.A.To4())
		case *dns.AAAA:
			a, _ = netip.AddrFromSlice(rr.AAAA)
		default:
			continue
		}
		le.Answers[le.NAnswers] = a
		le.NAnswers++
	}
}

// requestECS returns the client subnet of query r's ECS option (invalid:
// none).
func requestECS(r *dns.Msg) netip.Prefix {
	opt := r.IsEdns0()
	if opt == nil {
		return netip.Prefix{}
	}
	for _, o := range opt.Option {
		if e, ok := o.(*dns.EDNS0_SUBNET); ok {
			a, ok := netip.AddrFromSlice(e.Address)
			if !ok {
				return netip.Prefix{}
			}
			if e.Family == 1 {
				a = a.Unmap()
			}
			p, _ := a.Prefix(int(e.SourceNetmask))
			return p
		}
	}
	return netip.Prefix{}
}
