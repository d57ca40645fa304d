// Package accesslog is the access log (spillway.accessLog,
// docs/operations.md): a Log component that follows the config in force,
// and the writer generations it starts and stops.
package accesslog

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/spillwaylb/spillway/internal/armor"
	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/proxy"
)

// The access log (spillway.accessLog, docs/operations.md): a request
// fills its entry in a bounded queue, and one goroutine formats and
// writes the queue through a bufio.Writer every 10 ms. When the queue is
// full the line is dropped and counted, never waited for.

// defaultAccessLogBuffer is spillway.accessLog.bufferSize's default:
// at the writer's 10 ms tick it absorbs 409,600 lines a second. The
// queue and the writer's spare hold 2 × 4096 entries of about 430 bytes.
const defaultAccessLogBuffer = 4096

// logEntry is what a log line needs from a proxy.Record: strings (which
// may be kept) and numbers, filled in place in the queue.
type logEntry struct {
	start                            time.Time
	method, scheme, host, uri, proto string
	userAgent, referer               string
	remoteIP, serverIP               string
	frontend, urlMap, route          string
	service, group, zone, endpoint   string
	details, reason                  string
	// remotePort, requestID (x-request-id), tlsVersion (as Envoy's
	// %DOWNSTREAM_TLS_VERSION%: TLSv1.3) and sni (%REQUESTED_SERVER_NAME%).
	remotePort, requestID, tlsVersion, sni string
	// project, when set, makes trace Cloud Logging's
	// projects/PROJECT/traces/ID.
	project                 string
	status, retries         int
	reqSize, respSize       int64
	latency, backendLatency time.Duration
	trace                   proxy.TraceContext
	hasBackendLatency       bool
	// Cloud CDN: cacheLookup, cacheHit, cacheValidatedWithOriginServer,
	// cacheFillBytes (Google's httpRequest fields); bucket is the
	// backend bucket that served the request.
	cacheLookup, cacheHit, cacheValidated bool
	cacheFill                             int64
	bucket                                string
	// security is what the edge ([0]) and backend ([1]) security
	// policies decided.
	security [2]armor.Decision
	// edgeIP is the edge's address when a trusted edge forwarded the
	// request (remoteIP is then the client's, as the edge gave it);
	// layer what the regional layer said to an edge.
	edgeIP string
	layer  proxy.LayerOutcome
}

// fillLogEntry sets *e from rec.
func fillLogEntry(e *logEntry, rec *proxy.Record) {
	r := rec.Request
	*e = logEntry{
		start: rec.Start, method: r.Method, host: r.Host, uri: r.RequestURI, proto: r.Proto,
		remoteIP: rec.ClientAddr(), serverIP: proxy.ServerIP(r), layer: rec.Layer,
		urlMap: rec.URLMap, route: rec.Route,
		details: rec.Details, reason: rec.Reason,
		status: rec.Status, retries: rec.Retries(),
		reqSize: rec.RequestSize, respSize: rec.ResponseSize,
		latency: rec.Latency, backendLatency: rec.BackendLatency, hasBackendLatency: rec.Attempts > 0,
		trace: rec.Trace, security: rec.Security,
		cacheLookup: rec.CacheLookup, cacheHit: rec.CacheHit, cacheValidated: rec.CacheValidated,
		cacheFill: rec.CacheFillBytes, bucket: rec.Bucket,
	}
	e.scheme = "http"
	if r.TLS != nil || rec.Frontend != nil && rec.Frontend.Protocol == "HTTPS" {
		e.scheme = "https"
	}
	if rec.Frontend != nil {
		e.frontend = rec.Frontend.Name
	}
	if rec.ClientIP != "" {
		e.edgeIP = proxy.RemoteIP(r)
	}
	if ua := r.Header["User-Agent"]; len(ua) > 0 {
		e.userAgent = ua[0]
	}
	if id := r.Header["X-Request-Id"]; len(id) > 0 {
		e.requestID = id[0]
	}
	if i := strings.LastIndexByte(r.RemoteAddr, ':'); i >= 0 {
		e.remotePort = r.RemoteAddr[i+1:]
	}
	if cs := r.TLS; cs != nil {
		e.tlsVersion, e.sni = tlsVersionName(cs.Version), cs.ServerName
	}
	if ref := r.Header["Referer"]; len(ref) > 0 {
		e.referer = ref[0]
	}
	if rec.Service != nil {
		e.service = rec.Service.Name
	}
	if b := rec.Backend; b != nil {
		e.group, e.zone = b.Group.Name, b.Group.Zone
	}
	if ep := rec.Endpoint; ep != nil {
		e.endpoint = ep.Addr
		if ep.Group != nil {
			e.group, e.zone = ep.Group.Name, ep.Group.Zone
		}
	}
	if e.layer.Address != "" {
		// The regional layer chose zone and endpoint; the edge's own
		// pick only chose the region.
		e.group, e.zone, e.endpoint = "", e.layer.Zone, e.layer.Endpoint
	}
}

// tlsVersionName names a TLS version as Envoy's %DOWNSTREAM_TLS_VERSION%.
func tlsVersionName(v uint16) string {
	switch v {
	case tls.VersionTLS13:
		return "TLSv1.3"
	case tls.VersionTLS12:
		return "TLSv1.2"
	case tls.VersionTLS11:
		return "TLSv1.1"
	case tls.VersionTLS10:
		return "TLSv1"
	}
	return "unknown"
}

// accessLogSettings are spillway.accessLog's resolved values.
type accessLogSettings struct {
	path    string // "stdout" or a file
	text    bool
	buffer  int
	project string // projectId: trace as projects/PROJECT/traces/ID
}

func accessLogConfig(c *config.Config) (accessLogSettings, float64, bool) {
	if c.Spillway == nil || c.Spillway.AccessLog == nil || !c.Spillway.AccessLog.Enable {
		return accessLogSettings{}, 0, false
	}
	al := c.Spillway.AccessLog
	st := accessLogSettings{path: al.Path, text: al.Format == "TEXT", buffer: defaultAccessLogBuffer, project: al.ProjectID}
	if st.path == "" {
		st.path = "stdout"
	}
	if al.BufferSize != nil {
		st.buffer = *al.BufferSize
	}
	rate := 1.0
	if al.SampleRate != nil {
		rate = *al.SampleRate
	}
	return st, rate, true
}

// accessLog is one generation of the writer: a reload that changes the
// settings starts a new one and stops the old one, which writes what it
// has queued and closes its file.
type accessLog struct {
	settings accessLogSettings
	// mu guards pending, the entries waiting for the writer (capacity
	// settings.buffer, never grown). Requests fill their entry in place
	// under mu; the writer swaps pending for an empty slice of the same
	// capacity and formats the batch without the lock.
	mu      sync.Mutex
	pending []logEntry
	// dnsPending are DNS query log entries (dnslog.go), made on first
	// use; dnsCounts count their lines.
	dnsPending []DNSEntry
	stop       chan struct{}
	done       chan struct{}
	counts     *accessLogCounts
	dnsCounts  *accessLogCounts
}

// accessLogCounts outlive generations.
type accessLogCounts struct {
	written, dropped, writeErrors atomic.Uint64
}

// openAccessLog opens the destination and starts the writer.
func openAccessLog(st accessLogSettings, stdout io.Writer, counts, dnsCounts *accessLogCounts) (*accessLog, error) {
	var w io.Writer = stdout
	var closer io.Closer
	if st.path != "stdout" {
		f, err := os.OpenFile(st.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("spillway.accessLog.path: open %s: %w", st.path, err)
		}
		w, closer = f, f
	}
	a := &accessLog{settings: st, pending: make([]logEntry, 0, st.buffer), stop: make(chan struct{}), done: make(chan struct{}), counts: counts, dnsCounts: dnsCounts}
	go a.run(bufio.NewWriterSize(w, 64<<10), closer)
	return a, nil
}

// slot returns the next free entry with a.mu held (the caller fills it
// and unlocks), or nil, with the drop counted and mu released, when the
// queue is full.
func (a *accessLog) slot() *logEntry {
	a.mu.Lock()
	n := len(a.pending)
	if n == cap(a.pending) {
		a.mu.Unlock()
		a.counts.dropped.Add(1)
		return nil
	}
	a.pending = a.pending[:n+1]
	return &a.pending[n]
}

// record queues the entry of rec, or drops and counts it when the queue
// is full. The entry is written in place: no copy, no allocation.
func (a *accessLog) record(rec *proxy.Record) {
	if e := a.slot(); e != nil {
		fillLogEntry(e, rec)
		e.project = a.settings.project
		a.mu.Unlock()
	}
}

// send queues a copy of e, or drops and counts it when the queue is full.
func (a *accessLog) send(e *logEntry) {
	if slot := a.slot(); slot != nil {
		*slot = *e
		a.mu.Unlock()
	}
}

// close stops the writer after it wrote what is queued.
func (a *accessLog) close() {
	close(a.stop)
	<-a.done
}

func (a *accessLog) run(bw *bufio.Writer, closer io.Closer) {
	defer close(a.done)
	buf := make([]byte, 0, 2048)
	var tc timeCache
	write := func(e *logEntry) {
		if a.settings.text {
			buf = appendTextLine(buf[:0], e, &tc)
		} else {
			buf = appendJSONLine(buf[:0], e, &tc)
		}
		if _, err := bw.Write(buf); err != nil {
			a.counts.writeErrors.Add(1)
			return
		}
		a.counts.written.Add(1)
	}
	// The writer wakes on a ticker and takes the whole queue, rather than
	// waiting on it: a request never wakes a goroutine, and a busy log
	// costs one write(2) per tick (or per 64 KiB), not per line.
	spare := make([]logEntry, 0, a.settings.buffer)
	var dnsSpare []DNSEntry
	drain := func() {
		a.mu.Lock()
		batch, dnsBatch := a.pending, a.dnsPending
		a.pending, a.dnsPending = spare, dnsSpare
		a.mu.Unlock()
		for i := range batch {
			write(&batch[i])
		}
		clear(batch) // drop the strings the entries hold
		spare = batch[:0]
		dnsSpare = a.writeDNS(bw, dnsBatch, buf, &tc)
		if bw.Buffered() > 0 {
			bw.Flush()
		}
	}
	tick := time.NewTicker(accessLogTick)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			drain()
		case <-a.stop:
			drain()
			if closer != nil {
				closer.Close()
			}
			return
		}
	}
}

// writeDNS writes a batch of DNS query log entries through bw with
// scratch buf and returns the batch emptied, for reuse.
func (a *accessLog) writeDNS(bw *bufio.Writer, batch []DNSEntry, buf []byte, tc *timeCache) []DNSEntry {
	for i := range batch {
		buf = appendDNSLine(buf[:0], &batch[i], tc)
		if _, err := bw.Write(buf); err != nil {
			a.dnsCounts.writeErrors.Add(1)
			continue
		}
		a.dnsCounts.written.Add(1)
	}
	clear(batch)
	return batch[:0]
}

// accessLogTick is how often the writer drains its queue: lines reach
// the destination at most this late, and a queue of bufferSize lines
// absorbs bufferSize/accessLogTick lines a second (409,600 by default).
const accessLogTick = 10 * time.Millisecond

// appendJSONTrace writes the entry's trace, span and sampling fields
// (trace as projects/PROJECT/traces/ID when a project is configured, so
// that Cloud Logging links it), when it has a trace.
func appendJSONTrace(b []byte, e *logEntry) []byte {
	if !e.trace.Valid() {
		return b
	}
	b = append(b, `,"trace":"`...)
	if e.project != "" {
		b = append(b, "projects/"...)
		b = appendJSONChars(b, e.project)
		b = append(b, "/traces/"...)
	}
	b = append(b, e.trace.ID[:]...)
	b = append(b, `","spanId":"`...)
	b = appendHex16(b, e.trace.Span)
	b = append(b, `","traceSampled":`...)
	return strconv.AppendBool(b, e.trace.Sampled)
}

// appendJSONLine formats an entry like a Google load balancer log entry:
// httpRequest, trace, spanId and jsonPayload with statusDetails, plus
// Spillway's decision (docs/operations.md).
func appendJSONLine(b []byte, e *logEntry, tc *timeCache) []byte {
	b = append(b, `{"timestamp":"`...)
	b = tc.appendTimestamp(b, e.start)
	b = append(b, `","severity":"`...)
	if e.status >= 500 || e.status == 0 {
		b = append(b, "WARNING"...)
	} else {
		b = append(b, "INFO"...)
	}
	b = append(b, `","httpRequest":{"requestMethod":`...)
	b = appendJSONString(b, e.method)
	b = append(b, `,"requestUrl":"`...)
	b = appendRequestURL(b, e, appendJSONChars)
	b = append(b, '"')
	b = append(b, `,"requestSize":"`...)
	b = strconv.AppendInt(b, e.reqSize, 10)
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(e.status), 10)
	b = append(b, `,"responseSize":"`...)
	b = strconv.AppendInt(b, e.respSize, 10)
	b = append(b, `","userAgent":`...)
	b = appendJSONString(b, e.userAgent)
	b = append(b, `,"remoteIp":`...)
	b = appendJSONString(b, e.remoteIP)
	b = append(b, `,"serverIp":`...)
	b = appendJSONString(b, e.serverIP)
	if e.referer != "" {
		b = append(b, `,"referer":`...)
		b = appendJSONString(b, e.referer)
	}
	b = append(b, `,"latency":"`...)
	b = appendSeconds(b, e.latency)
	b = append(b, `s","protocol":`...)
	b = appendJSONString(b, e.proto)
	b = appendJSONCache(b, e)
	b = append(b, '}')
	b = appendJSONTrace(b, e)
	b = append(b, `,"jsonPayload":{"@type":"type.googleapis.com/google.cloud.loadbalancing.type.LoadBalancerLogEntry","statusDetails":`...)
	b = appendJSONString(b, e.details)
	b = append(b, `,"frontend":`...)
	b = appendJSONString(b, e.frontend)
	b = append(b, `,"urlMap":`...)
	b = appendJSONString(b, e.urlMap)
	opt := func(key, v string) {
		if v != "" {
			b = append(b, `,"`...)
			b = append(b, key...)
			b = append(b, `":`...)
			b = appendJSONString(b, v)
		}
	}
	opt("routeRule", e.route)
	opt("backendService", e.service)
	opt("backendBucket", e.bucket)
	opt("backendGroup", e.group)
	opt("zone", e.zone)
	opt("endpoint", e.endpoint)
	b = append(b, `,"retries":`...)
	b = strconv.AppendInt(b, int64(e.retries), 10)
	if e.hasBackendLatency {
		b = append(b, `,"backendLatency":"`...)
		b = appendSeconds(b, e.backendLatency)
		b = append(b, 's', '"')
	}
	opt("reason", e.reason)
	opt("edgeIp", e.edgeIP)
	b = appendJSONLayer(b, &e.layer)
	opt("requestId", e.requestID)
	opt("remotePort", e.remotePort)
	opt("tlsVersion", e.tlsVersion)
	opt("requestedServerName", e.sni)
	if e.trace.Generated {
		b = append(b, `,"traceGenerated":true`...)
	}
	b = appendSecurity(b, e.security)
	return append(b, "}}\n"...)
}

// appendJSONLayer appends "regionalLayer": what the regional layer said
// to an edge about the request, nothing when it went to none.
func appendJSONLayer(b []byte, l *proxy.LayerOutcome) []byte {
	if l.Address == "" {
		return b
	}
	b = append(b, `,"regionalLayer":{"address":`...)
	b = appendJSONString(b, l.Address)
	b = append(b, `,"region":`...)
	b = appendJSONString(b, l.Region)
	for _, f := range [...][2]string{{"zone", l.Zone}, {"endpoint", l.Endpoint}, {"statusDetails", l.Details}} {
		if f[1] != "" {
			b = append(b, `,"`...)
			b = append(b, f[0]...)
			b = append(b, `":`...)
			b = appendJSONString(b, f[1])
		}
	}
	return append(b, '}')
}

// securityFields are Google's log fields for the edge and backend
// policies' enforced and preview outcomes.
var securityFields = [2][2]string{
	{"enforcedEdgeSecurityPolicy", "previewEdgeSecurityPolicy"},
	{"enforcedSecurityPolicy", "previewSecurityPolicy"},
}

// appendSecurity appends the security policies' outcomes, as Google's
// enforcedSecurityPolicy and previewSecurityPolicy objects.
func appendSecurity(b []byte, ds [2]armor.Decision) []byte {
	for i := range ds {
		if o := &ds[i].Enforced; o.Policy != "" {
			b = appendPolicyOutcome(b, securityFields[i][0], o)
		}
		if o := ds[i].Preview; o != nil {
			b = appendPolicyOutcome(b, securityFields[i][1], o)
		}
	}
	return b
}

func appendPolicyOutcome(b []byte, field string, o *armor.Outcome) []byte {
	b = append(b, `,"`...)
	b = append(b, field...)
	b = append(b, `":{"name":`...)
	b = appendJSONString(b, o.Policy)
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, o.Priority, 10)
	b = append(b, `,"configuredAction":`...)
	b = appendJSONString(b, o.ConfiguredAction)
	b = append(b, `,"outcome":`...)
	b = appendJSONString(b, o.Result)
	if o.RateLimitAction != "" {
		b = append(b, `,"rateLimitAction":{"key":`...)
		b = appendJSONString(b, o.RateLimitKey)
		b = append(b, `,"outcome":`...)
		b = appendJSONString(b, o.RateLimitAction)
		b = append(b, '}')
	}
	if len(o.WAFIDs) > 0 {
		b = append(b, `,"preconfiguredExprIds":[`...)
		for j, id := range o.WAFIDs {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, id)
		}
		b = append(b, ']')
	}
	if f := o.WAFField; f != nil {
		// Google's verbose logging (the policy's logLevel VERBOSE).
		b = append(b, `,"matchedFieldType":`...)
		b = appendJSONString(b, f.Type)
		b = append(b, `,"matchedFieldName":`...)
		b = appendJSONString(b, f.Name)
		b = append(b, `,"matchedFieldValue":`...)
		b = appendJSONString(b, f.Value)
		b = append(b, `,"matchedFieldLength":`...)
		b = strconv.AppendInt(b, int64(f.Length), 10)
	}
	return append(b, '}')
}

// appendTextLine formats an entry as one line of key=value pairs.
func appendTextLine(b []byte, e *logEntry, tc *timeCache) []byte {
	b = tc.appendTimestamp(b, e.start)
	kv := func(k, v string) {
		b = append(b, ' ')
		b = append(b, k...)
		b = append(b, '=')
		b = strconv.AppendQuote(b, v)
	}
	kn := func(k string, n int64) {
		b = append(b, ' ')
		b = append(b, k...)
		b = append(b, '=')
		b = strconv.AppendInt(b, n, 10)
	}
	kv("method", e.method)
	b = append(b, " url="...)
	b = strconv.AppendQuote(b, string(appendRequestURL(nil, e, func(b []byte, s string) []byte { return append(b, s...) })))
	kn("status", int64(e.status))
	kv("statusDetails", e.details)
	kn("requestSize", e.reqSize)
	kn("responseSize", e.respSize)
	b = append(b, " latency="...)
	b = appendSeconds(b, e.latency)
	b = append(b, 's')
	kv("remoteIp", e.remoteIP)
	kv("serverIp", e.serverIP)
	kv("protocol", e.proto)
	kv("userAgent", e.userAgent)
	kv("referer", e.referer)
	kv("frontend", e.frontend)
	kv("urlMap", e.urlMap)
	kv("routeRule", e.route)
	kv("backendService", e.service)
	kv("backendGroup", e.group)
	kv("zone", e.zone)
	kv("endpoint", e.endpoint)
	kn("retries", int64(e.retries))
	if e.bucket != "" {
		kv("backendBucket", e.bucket)
	}
	if e.cacheLookup {
		b = fmt.Appendf(b, " cacheLookup=true cacheHit=%t cacheValidatedWithOriginServer=%t cacheFillBytes=%d", e.cacheHit, e.cacheValidated, e.cacheFill)
	}
	if e.reason != "" {
		kv("reason", e.reason)
	}
	if e.edgeIP != "" {
		kv("edgeIp", e.edgeIP)
	}
	if l := &e.layer; l.Address != "" {
		kv("regionalLayer", l.Address)
		kv("regionalLayerRegion", l.Region)
		kv("regionalLayerStatusDetails", l.Details)
	}
	for _, f := range [...][2]string{{"requestId", e.requestID}, {"remotePort", e.remotePort}, {"tlsVersion", e.tlsVersion}, {"requestedServerName", e.sni}} {
		if f[1] != "" {
			kv(f[0], f[1])
		}
	}
	for i := range e.security {
		if o := &e.security[i].Enforced; o.Policy != "" {
			kv(securityFields[i][0], o.Policy+"/"+strconv.FormatInt(o.Priority, 10)+"/"+o.Result)
		}
	}
	if e.trace.Valid() {
		b = append(b, " trace="...)
		b = append(b, e.trace.ID[:]...)
	}
	return append(b, '\n')
}

// appendRequestURL appends the URL the client asked for: scheme, host
// and request target (an absolute-form target as it is), each part
// through esc.
func appendRequestURL(b []byte, e *logEntry, esc func([]byte, string) []byte) []byte {
	if len(e.uri) > 0 && e.uri[0] != '/' && e.uri != "*" {
		return esc(b, e.uri)
	}
	b = esc(b, e.scheme)
	b = append(b, "://"...)
	b = esc(b, e.host)
	return esc(b, e.uri)
}

// appendSeconds writes d as seconds with up to 9 decimals ("0.001234"),
// in integer arithmetic.
func appendSeconds(b []byte, d time.Duration) []byte {
	if d < 0 {
		d = 0
	}
	b = strconv.AppendInt(b, int64(d/time.Second), 10)
	frac := int64(d % time.Second)
	if frac == 0 {
		return b
	}
	var digits [10]byte
	digits[0] = '.'
	for i := 9; i >= 1; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := 10
	for digits[n-1] == '0' {
		n--
	}
	return append(b, digits[:n]...)
}

// timeCache remembers the formatted second of the last timestamp: lines
// come in bursts from the same second, and the writer is one goroutine.
type timeCache struct {
	sec    int64
	prefix []byte // "2006-01-02T15:04:05"
}

// appendTimestamp appends t in UTC as RFC 3339 with nanoseconds
// ("2006-01-02T15:04:05.999999999Z", trailing zeros dropped).
func (c *timeCache) appendTimestamp(b []byte, t time.Time) []byte {
	t = t.UTC()
	if sec := t.Unix(); sec != c.sec || c.prefix == nil {
		c.sec = sec
		c.prefix = t.AppendFormat(c.prefix[:0], "2006-01-02T15:04:05")
	}
	b = append(b, c.prefix...)
	if ns := t.Nanosecond(); ns != 0 {
		var digits [10]byte
		digits[0] = '.'
		for i := 9; i >= 1; i-- {
			digits[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := 10
		for digits[n-1] == '0' {
			n--
		}
		b = append(b, digits[:n]...)
	}
	return append(b, 'Z')
}

func appendHex16(b []byte, v uint64) []byte {
	const hex = "0123456789abcdef"
	for i := 60; i >= 0; i -= 4 {
		b = append(b, hex[v>>uint(i)&0xf])
	}
	return b
}

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes
// U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendJSONChars(b, s)
	return append(b, '"')
}

// appendJSONChars appends s escaped for a JSON string, without quotes.
func appendJSONChars(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	// Fast path: the plain ASCII prefix (usually all of s) in one copy.
	i := 0
	for i < len(s) {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			break
		}
		i++
	}
	b = append(b, s[:i]...)
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return b
}

// appendJSONCache appends httpRequest's Cloud CDN fields (Google's
// names; cacheFillBytes is an int64, a string in JSON), only for
// requests that looked the cache up.
func appendJSONCache(b []byte, e *logEntry) []byte {
	if !e.cacheLookup {
		return b
	}
	b = append(b, `,"cacheLookup":true,"cacheHit":`...)
	b = strconv.AppendBool(b, e.cacheHit)
	b = append(b, `,"cacheValidatedWithOriginServer":`...)
	b = strconv.AppendBool(b, e.cacheValidated)
	if e.cacheFill > 0 {
		b = append(b, `,"cacheFillBytes":"`...)
		b = strconv.AppendInt(b, e.cacheFill, 10)
		b = append(b, '"')
	}
	return b
}
