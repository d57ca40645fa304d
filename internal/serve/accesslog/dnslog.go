package accesslog

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

// The DNS query log (spillway.dnsQueryLog, docs/dns.md): a sample of the
// DNS frontends' queries, one JSON line each, queued and written by the
// access log's writer. With the access log on and no path of its own (or
// the access log's path) its lines go through the access log's running
// writer, between whole access log lines; with a path of its own, a
// writer generation of its own writes them.

// MaxDNSAnswers is how many answer addresses a query log line carries.
const MaxDNSAnswers = 8

// defaultDNSLogBuffer is the DNS query log's queue: entries that may
// wait for the writer before lines are dropped and counted.
const defaultDNSLogBuffer = 4096

// DNSEntry is one DNS query log line. Its strings may be kept (they must
// not alias reused buffers).
type DNSEntry struct {
	Time    time.Time
	Latency time.Duration
	Client  netip.AddrPort
	// ECS is the query's EDNS Client Subnet (invalid: none).
	ECS netip.Prefix
	// Name is the QNAME as asked; Type and Rcode their mnemonics.
	Name, Type, Rcode string
	TCP               bool
	// Answers are the first NAnswers answer addresses (A, AAAA).
	Answers  [MaxDNSAnswers]netip.Addr
	NAnswers int
	// Zone answered from, GSLB member answered first ("": static).
	Zone, Member string
}

// dnsLogSettings are spillway.dnsQueryLog's resolved values: the
// destination ("" shares the access log's writer).
type dnsLogSettings struct {
	path string
}

// dnsLogConfig resolves spillway.dnsQueryLog against the access log's
// settings (acc, accOn).
func dnsLogConfig(c *config.Config, acc accessLogSettings, accOn bool) (dnsLogSettings, float64, bool) {
	if c.Spillway == nil || c.Spillway.DNSQueryLog == nil || !c.Spillway.DNSQueryLog.Enable {
		return dnsLogSettings{}, 0, false
	}
	ql := c.Spillway.DNSQueryLog
	rate := 1.0
	if ql.SampleRate != nil {
		rate = *ql.SampleRate
	}
	path := ql.Path
	if accOn && (path == "" || path == acc.path) {
		return dnsLogSettings{}, rate, true // shared
	}
	if path == "" {
		path = "stdout"
	}
	return dnsLogSettings{path: path}, rate, true
}

// DNSSampled draws whether a query is logged: false when the query log
// is off.
func (l *Log) DNSSampled() bool {
	return l.dnsOn.Load() && sampled(math.Float64frombits(l.dnsRate.Load()))
}

// DNSCounts returns the DNS query log's line counts.
func (l *Log) DNSCounts() Counts {
	c := &l.dnsCounts
	return Counts{Written: c.written.Load(), Dropped: c.dropped.Load(), WriteErrors: c.writeErrors.Load()}
}

// RecordDNS queues e (copied) when the query log is on. It never
// blocks: past the queue the line is dropped and counted.
func (l *Log) RecordDNS(e *DNSEntry) {
	if !l.dnsOn.Load() {
		return
	}
	a := l.dnsCur.Load()
	if l.dnsShared.Load() {
		a = l.cur.Load()
	}
	if a == nil {
		return
	}
	a.mu.Lock()
	if a.dnsPending == nil {
		a.dnsPending = make([]DNSEntry, 0, defaultDNSLogBuffer)
	}
	if len(a.dnsPending) == cap(a.dnsPending) {
		a.mu.Unlock()
		l.dnsCounts.dropped.Add(1)
		return
	}
	a.dnsPending = append(a.dnsPending, *e)
	a.mu.Unlock()
}

// configureDNS starts, replaces or stops the DNS query log's own writer
// for config c, with l.mu held; acc and accOn are the access log's
// settings in force.
func (l *Log) configureDNS(c *config.Config, acc accessLogSettings, accOn bool) error {
	st, rate, on := dnsLogConfig(c, acc, accOn)
	l.dnsRate.Store(math.Float64bits(rate))
	old := l.dnsCur.Load()
	if !on || st.path == "" {
		l.dnsShared.Store(on)
		l.dnsOn.Store(on)
		if old != nil {
			l.dnsCur.Store(nil)
			go old.close()
		}
		return nil
	}
	if old != nil && old.settings.path == st.path {
		l.dnsShared.Store(false)
		l.dnsOn.Store(true)
		return nil
	}
	a, err := openAccessLog(accessLogSettings{path: st.path}, l.stdout, &l.counts, &l.dnsCounts)
	if err != nil {
		return fmt.Errorf("spillway.dnsQueryLog.path: %w", err)
	}
	l.dnsCur.Store(a)
	l.dnsShared.Store(false)
	l.dnsOn.Store(true)
	if old != nil {
		go old.close()
	}
	return nil
}

// appendDNSLine formats a query log line: JSON with the query, the
// answer and Spillway's decision.
func appendDNSLine(b []byte, e *DNSEntry, tc *timeCache) []byte {
	b = append(b, `{"timestamp":"`...)
	b = tc.appendTimestamp(b, e.Time)
	b = append(b, `","severity":"INFO","dnsQuery":{"clientIp":"`...)
	b = e.Client.Addr().AppendTo(b)
	b = append(b, `","clientPort":`...)
	b = strconv.AppendUint(b, uint64(e.Client.Port()), 10)
	if e.ECS.IsValid() {
		b = append(b, `,"ecs":"`...)
		b = e.ECS.AppendTo(b)
		b = append(b, '"')
	}
	b = append(b, `,"transport":"`...)
	if e.TCP {
		b = append(b, "tcp"...)
	} else {
		b = append(b, "udp"...)
	}
	b = append(b, `","qname":`...)
	b = appendJSONString(b, e.Name)
	b = append(b, `,"qtype":`...)
	b = appendJSONString(b, e.Type)
	b = append(b, `,"rcode":`...)
	b = appendJSONString(b, e.Rcode)
	b = append(b, `,"answers":[`...)
	for i := range min(e.NAnswers, MaxDNSAnswers) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = e.Answers[i].AppendTo(b)
		b = append(b, '"')
	}
	b = append(b, `],"latency":"`...)
	b = appendSeconds(b, e.Latency)
	b = append(b, `s"`...)
	if e.Zone != "" {
		b = append(b, `,"zone":`...)
		b = appendJSONString(b, e.Zone)
	}
	if e.Member != "" {
		b = append(b, `,"member":`...)
		b = appendJSONString(b, e.Member)
	}
	return append(b, "}}\n"...)
}
