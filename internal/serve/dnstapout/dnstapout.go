// Package dnstapout writes the DNS frontends' queries and responses as
// dnstap (spillway.dnstap, docs/dns.md): AUTH_QUERY and AUTH_RESPONSE
// messages in a Frame Streams stream, to a file or a Unix socket, through
// github.com/dnstap/golang-dnstap. The answer path only copies the
// exchange into a bounded queue; one goroutine per writer builds and
// encodes the messages. Past the queue messages are dropped and counted,
// never waited for.
package dnstapout

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	dnstap "github.com/dnstap/golang-dnstap"
	"github.com/miekg/dns"
	"google.golang.org/protobuf/proto"

	"github.com/spillwaylb/spillway/internal/config"
)

// defaultBuffer is spillway.dnstap.bufferSize's default.
const defaultBuffer = 8192

// Exchange is one answered query. Send copies what it keeps.
type Exchange struct {
	Start   time.Time
	Latency time.Duration
	Client  netip.AddrPort
	// Server is the address the query arrived on (invalid: unknown).
	Server netip.AddrPort
	TCP    bool
	// Query and Response are the wire messages (Response nil: none sent).
	Query, Response []byte
	// Zone is the origin of the zone that answered ("" if none).
	Zone string
}

// Counts are the messages since the start, all writers together: sent to
// the writer, dropped at a full queue.
type Counts struct {
	Sent, Dropped uint64
}

// Tap is the dnstap component: the writer of the config in force (none
// when spillway.dnstap is absent), replaced on reload when its settings
// change.
type Tap struct {
	log      *slog.Logger
	hostname string
	mu       sync.Mutex // serialises Configure and Stop
	cur      atomic.Pointer[writer]
	sent     atomic.Uint64
	dropped  atomic.Uint64
}

// New returns a Tap with no writer; Configure starts one. hostname is
// the default identity.
func New(log *slog.Logger, hostname string) *Tap {
	return &Tap{log: log, hostname: hostname}
}

// On reports whether a writer runs.
func (t *Tap) On() bool { return t.cur.Load() != nil }

// Counts returns the message counts.
func (t *Tap) Counts() Counts { return Counts{Sent: t.sent.Load(), Dropped: t.dropped.Load()} }

// Send queues e (copied) for the writer when one runs. It never blocks.
func (t *Tap) Send(e *Exchange) {
	w := t.cur.Load()
	if w == nil {
		return
	}
	c := *e
	buf := make([]byte, 0, len(e.Query)+len(e.Response))
	buf = append(buf, e.Query...)
	c.Query = buf[:len(e.Query):len(e.Query)]
	if e.Response != nil {
		c.Response = append(buf, e.Response...)[len(e.Query):]
	}
	select {
	case w.queue <- c:
		t.sent.Add(1)
	default:
		t.dropped.Add(1)
	}
}

// settings are spillway.dnstap's resolved values.
type settings struct {
	socket, file, identity, version string
	buffer                          int
}

func (t *Tap) settings(c *config.Config) (settings, bool) {
	if c.Spillway == nil || c.Spillway.DNSTap == nil {
		return settings{}, false
	}
	d := c.Spillway.DNSTap
	st := settings{socket: d.Socket, file: d.File, identity: d.Identity, version: d.Version, buffer: defaultBuffer}
	if st.identity == "" {
		st.identity = t.hostname
	}
	if st.version == "" {
		st.version = "spillway"
	}
	if d.BufferSize != nil {
		st.buffer = *d.BufferSize
	}
	return st, true
}

// Configure starts, replaces or stops the writer for config c. A writer
// whose settings are unchanged keeps running; a replaced one finishes
// what it has queued in the background.
func (t *Tap) Configure(c *config.Config) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, on := t.settings(c)
	old := t.cur.Load()
	if old != nil && on && old.settings == st {
		return nil
	}
	var w *writer
	if on {
		var err error
		if w, err = open(st, t.log); err != nil {
			return err
		}
	}
	t.cur.Store(w)
	if old != nil {
		go old.close()
	}
	return nil
}

// Start does nothing: the writer starts when Configure names a
// destination. With Stop, it makes the Tap a component of the server.
func (t *Tap) Start(context.Context) error { return nil }

// Stop stops the writer after it wrote what is queued, waiting at most
// until ctx ends.
func (t *Tap) Stop(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.cur.Swap(nil)
	if w == nil {
		return nil
	}
	done := make(chan struct{})
	go func() { w.close(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.log.Warn("dnstap: the destination did not take the last messages before shutdown ended")
	}
	return nil
}

// writer is one generation: the queue, the goroutine encoding it, and
// golang-dnstap's output.
type writer struct {
	settings settings
	queue    chan Exchange
	out      dnstap.Output
	done     chan struct{}
}

// open opens the destination and starts the writer.
func open(st settings, log *slog.Logger) (*writer, error) {
	var out dnstap.Output
	if st.file != "" {
		o, err := dnstap.NewFrameStreamOutputFromFilename(st.file)
		if err != nil {
			return nil, fmt.Errorf("spillway.dnstap.file: %w (fix: name a file Spillway can create in an existing directory)", err)
		}
		o.SetLogger(slogLogger{log})
		out = o
	} else {
		if _, err := os.Stat(st.socket); err != nil {
			// Not fatal: the collector may start later; the output
			// reconnects.
			log.Warn("dnstap: the socket is not there yet; connecting when it is", "socket", st.socket, "err", err)
		}
		o, err := dnstap.NewFrameStreamSockOutput(&net.UnixAddr{Name: st.socket, Net: "unix"})
		if err != nil {
			return nil, fmt.Errorf("spillway.dnstap.socket: %w", err)
		}
		o.SetRetryInterval(time.Second)
		o.SetFlushTimeout(time.Second)
		o.SetTimeout(5 * time.Second)
		o.SetLogger(slogLogger{log})
		out = o
	}
	w := &writer{settings: st, queue: make(chan Exchange, st.buffer), out: out, done: make(chan struct{})}
	go out.RunOutputLoop()
	go w.run()
	return w, nil
}

// close stops the writer after it encoded what is queued and the output
// wrote it.
func (w *writer) close() {
	close(w.queue)
	<-w.done
}

func (w *writer) run() {
	defer close(w.done)
	defer w.out.Close()
	ch := w.out.GetOutputChannel()
	id, ver := []byte(w.settings.identity), []byte(w.settings.version)
	for e := range w.queue {
		for _, resp := range []bool{false, true} {
			if resp && e.Response == nil {
				continue
			}
			b, err := proto.Marshal(message(&e, resp, id, ver))
			if err != nil {
				continue // not expected: every field is set by us
			}
			ch <- b
		}
	}
}

// message builds the AUTH_QUERY (resp false) or AUTH_RESPONSE of e.
func message(e *Exchange, resp bool, identity, version []byte) *dnstap.Dnstap {
	fam, prot := dnstap.SocketFamily_INET, dnstap.SocketProtocol_UDP
	if e.Client.Addr().Unmap().Is6() {
		fam = dnstap.SocketFamily_INET6
	}
	if e.TCP {
		prot = dnstap.SocketProtocol_TCP
	}
	m := &dnstap.Message{
		Type:           dnstap.Message_AUTH_QUERY.Enum(),
		SocketFamily:   &fam,
		SocketProtocol: &prot,
		QueryAddress:   e.Client.Addr().Unmap().AsSlice(),
		QueryPort:      ptr(uint32(e.Client.Port())),
		QueryTimeSec:   ptr(uint64(e.Start.Unix())),
		QueryTimeNsec:  ptr(uint32(e.Start.Nanosecond())),
	}
	if e.Server.IsValid() {
		m.ResponseAddress = e.Server.Addr().Unmap().AsSlice()
		m.ResponsePort = ptr(uint32(e.Server.Port()))
	}
	if e.Zone != "" {
		if z, err := packName(e.Zone); err == nil {
			m.QueryZone = z
		}
	}
	if resp {
		end := e.Start.Add(e.Latency)
		m.Type = dnstap.Message_AUTH_RESPONSE.Enum()
		m.ResponseTimeSec, m.ResponseTimeNsec = ptr(uint64(end.Unix())), ptr(uint32(end.Nanosecond()))
		m.ResponseMessage = e.Response
		// Responses carry the query too: a reader pairs them without
		// the AUTH_QUERY.
		m.QueryMessage = e.Query
	} else {
		m.QueryMessage = e.Query
	}
	return &dnstap.Dnstap{Identity: identity, Version: version, Type: dnstap.Dnstap_MESSAGE.Enum(), Message: m}
}

func ptr[T any](v T) *T { return &v }

// packName returns name in wire format (dnstap's query_zone).
func packName(name string) ([]byte, error) {
	b := make([]byte, 256)
	n, err := dns.PackDomainName(name, b, 0, nil, false)
	return b[:n], err
}

// slogLogger is golang-dnstap's Logger on slog.
type slogLogger struct{ log *slog.Logger }

// Printf implements dnstap.Logger.
func (l slogLogger) Printf(format string, v ...any) {
	l.log.Warn("dnstap: " + fmt.Sprintf(format, v...))
}
