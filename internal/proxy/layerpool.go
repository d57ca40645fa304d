package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/h1"
)

// Layers holds the connection pools of the regional layers EDGE frontends
// forward to, one per region and distinct regionalLayer config, so that
// they outlive reloads that keep the config: serve makes one and gives it
// to every handler (Config.Layers).
type Layers struct {
	mu    sync.Mutex
	pools map[string]*layerPool // by layerKey
	// wake tells Run that a pool was made; checks counts the checks in
	// flight (layercheck.go).
	wake   chan struct{}
	checks sync.WaitGroup
}

// NewLayers returns an empty set of regional-layer pools.
func NewLayers() *Layers {
	return &Layers{pools: map[string]*layerPool{}, wake: make(chan struct{}, 1)}
}

// layerKey identifies a region's regional-layer pool: the region, and
// everything that shapes its connections.
func layerKey(region string, l *config.RegionalLayer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%d|%s|%s|%s", region, l.Protocol, l.MaxConnections, l.CAFile, l.ServerName, strings.Join(l.Endpoints, ","))
	if c := l.ClientCertificate; c != nil {
		fmt.Fprintf(&b, "|%s|%s", c.CertificateFile, c.PrivateKeyFile)
	}
	iv, to, h, u := l.HealthCheck.Values()
	fmt.Fprintf(&b, "|%v|%v|%d|%d", iv, to, h, u)
	return b.String()
}

// pool returns region's pool for l, making it on first use (reading its
// certificate files).
func (ls *Layers) pool(region string, l *config.RegionalLayer) (*layerPool, error) {
	key := layerKey(region, l)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if p := ls.pools[key]; p != nil {
		return p, nil
	}
	p, err := newLayerPool(region, l)
	if err != nil {
		return nil, err
	}
	ls.pools[key] = p
	select {
	case ls.wake <- struct{}{}:
	default:
	}
	return p, nil
}

// retain closes, gracefully, the pools whose keys are not in want.
func (ls *Layers) retain(want map[string]bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for k, p := range ls.pools {
		if !want[k] {
			delete(ls.pools, k)
			p.close()
		}
	}
}

// Close closes every pool's connections.
func (ls *Layers) Close() { ls.retain(nil) }

// layerPool is an edge's connections to one region's regional layer: up
// to max long-lived HTTP/2 connections per regional endpoint, requests
// multiplexed on them as streams.
type layerPool struct {
	region string
	tls    bool
	max    int
	check  layerCheck
	// downs counts the requests that found every endpoint set aside.
	downs atomic.Uint64
	// closed: the pool was retired (close); it opens nothing more.
	closed atomic.Bool
	tr     *http2.Transport
	// cfg is the regionalLayer the pool was made from; tcfg its TLS
	// client config (nil for h2c), replaced when its files change
	// (layertls.go).
	cfg  *config.RegionalLayer
	tcfg atomic.Pointer[tls.Config]
	tlsf tlsFiles
	// upgrades carries WebSocket upgrades (layerupgrade.go).
	upgrades layerUpgrades
	eps      []*layerEndpoint
	next     atomic.Uint32
}

// layerEndpoint is one regional-layer address and its connections.
type layerEndpoint struct {
	addr    string
	mu      sync.Mutex
	conns   []*http2.ClientConn
	dial    sync.Mutex // one dial at a time
	dialled atomic.Int64
	aside   atomic.Int64 // set aside until this Unix nanosecond
	// health is the active check's state (layercheck.go).
	health layerHealth
	// outcomes counts the requests sent to the endpoint by outcome
	// (layerOutcome).
	outcomes [nLayerOutcomes]atomic.Uint64
}

// Outcomes of a request to a regional-layer endpoint, the outcome label
// of spillway_regional_layer_requests_total: a response by status class,
// or why there was none.
const (
	layer1xx = iota
	layer2xx
	layer3xx
	layer4xx
	layer5xx
	layerConnectFailure
	layerTimeout
	layerError
	layerCancelled
	nLayerOutcomes
)

// layerOutcomeNames are the outcome labels, by layerOutcome; the label
// of a request that found every endpoint set aside is "layer_down".
func layerOutcomeName(i int) string {
	return [nLayerOutcomes]string{"1xx", "2xx", "3xx", "4xx", "5xx", "connect_failure", "timeout", "error", "cancelled"}[i]
}

func newLayerPool(region string, l *config.RegionalLayer) (*layerPool, error) {
	p := &layerPool{region: region, tls: l.Protocol == "HTTP2", max: l.MaxConnections, cfg: l}
	p.check.interval, p.check.timeout, p.check.healthy, p.check.unhealthy = l.HealthCheck.Values()
	if p.max <= 0 {
		p.max = config.DefaultLayerConnections
	}
	p.tr = &http2.Transport{
		AllowHTTP:          true,
		DisableCompression: true,
		IdleConnTimeout:    h1.BackendIdleTimeout,
		ReadIdleTimeout:    30 * time.Second, // ping a quiet connection
		PingTimeout:        10 * time.Second,
		MaxHeaderListSize:  h1.MaxResponseHeaderBytes,
	}
	if p.tls {
		p.tlsf.sum = tlsFilesSum(l)
		cfg, err := layerTLS(l)
		if err != nil {
			return nil, err
		}
		p.tcfg.Store(cfg)
	}
	for _, a := range l.Endpoints {
		p.eps = append(p.eps, &layerEndpoint{addr: a})
	}
	return p, nil
}

// errLayerDown is the error of an attempt for a region whose regional
// layer has every endpoint set aside.
var errLayerDown = errors.New("every endpoint of the regional layer is set aside after connect failures")

// down reports whether every endpoint is set aside.
func (p *layerPool) down(now time.Time) bool {
	for _, e := range p.eps {
		if e.aside.Load() <= now.UnixNano() {
			return false
		}
	}
	return true
}

// endpoint returns the next endpoint in turn that is not set aside.
func (p *layerPool) endpoint(now time.Time) *layerEndpoint {
	n := uint32(len(p.eps))
	start := p.next.Add(1)
	for i := range n {
		e := p.eps[(start+i)%n]
		if e.aside.Load() <= now.UnixNano() {
			return e
		}
	}
	return nil
}

// conn returns a connection to e to send one request on: the least
// busy open one, or a new one when every open one is busy and there are
// fewer than max.
func (p *layerPool) conn(ctx context.Context, e *layerEndpoint) (*http2.ClientConn, error) {
	best, busy, n := e.least()
	if best != nil && (!busy || n >= p.max) {
		return best, nil
	}
	e.dial.Lock()
	defer e.dial.Unlock()
	if best, busy, n = e.least(); best != nil && (!busy || n >= p.max) {
		return best, nil // another request dialled meanwhile
	}
	cc, err := p.open(ctx, e)
	if err != nil {
		if best != nil {
			return best, nil // the open ones still work
		}
		p.failed(e, time.Now())
		return nil, err
	}
	return cc, nil
}

// open dials one more connection to e and adds it to e's (with e.dial
// held).
func (p *layerPool) open(ctx context.Context, e *layerEndpoint) (*http2.ClientConn, error) {
	cc, err := p.dial(ctx, e.addr)
	if err != nil {
		return nil, err
	}
	e.dialled.Add(1)
	e.mu.Lock()
	if p.closed.Load() {
		e.mu.Unlock()
		cc.Close()
		return nil, errLayerClosed
	}
	e.conns = append(e.conns, cc)
	e.mu.Unlock()
	return cc, nil
}

// errLayerClosed is the error of a connection opened as its pool was
// retired by a reload.
var errLayerClosed = errors.New("the regional layer's pool was retired by a reload")

// least returns e's least busy usable connection (nil if none), whether
// it has a stream in flight, and how many usable connections there are.
// Connections that can take no new request are dropped.
func (e *layerEndpoint) least() (best *http2.ClientConn, busy bool, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	live := e.conns[:0]
	bestLoad := -1
	for _, cc := range e.conns {
		// A closed connection that never carried a request still says
		// it can take one (to report its error): State tells.
		st := cc.State()
		if st.Closed || st.Closing || !cc.CanTakeNewRequest() {
			continue
		}
		live = append(live, cc)
		load := st.StreamsActive + st.StreamsReserved + st.StreamsPending
		if bestLoad < 0 || load < bestLoad {
			best, bestLoad = cc, load
		}
	}
	clear(e.conns[len(live):])
	e.conns = live
	return best, bestLoad > 0, len(live)
}

// dial opens one HTTP/2 connection to addr.
func (p *layerPool) dial(ctx context.Context, addr string) (*http2.ClientConn, error) {
	ctx, cancel := context.WithTimeout(ctx, h1.BackendDialTimeout)
	defer cancel()
	d := net.Dialer{KeepAlive: 30 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc := p.tcfg.Load(); tc != nil {
		cfg := tc.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err} // a connect failure
		}
		if tc.ConnectionState().NegotiatedProtocol != "h2" {
			c.Close()
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("the regional layer did not negotiate h2")}
		}
		c = tc
	}
	cc, err := p.tr.NewClientConn(c)
	if err != nil {
		c.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	return cc, nil
}

// close shuts every connection down gracefully (streams in flight
// finish), in the background, and opens no more.
func (p *layerPool) close() {
	p.closed.Store(true)
	p.retire()
}

// retire shuts every open connection down gracefully, in the
// background: new requests open new ones.
func (p *layerPool) retire() {
	for _, e := range p.eps {
		e.mu.Lock()
		conns := e.conns
		e.conns = nil
		e.mu.Unlock()
		for _, cc := range conns {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if cc.Shutdown(ctx) != nil {
					cc.Close()
				}
			}()
		}
	}
}

// LayerStats is what an edge knows of one region's regional layer, for
// /metrics and get-health.
type LayerStats struct {
	Region string
	// Down counts the requests that found every endpoint set aside.
	Down      uint64
	Endpoints []LayerEndpointStats
}

// LayerEndpointStats is one regional-layer endpoint.
type LayerEndpointStats struct {
	Address string
	// Connections is how many HTTP/2 connections are open to it now;
	// Dialled how many were opened since the pool was made.
	Connections int
	Dialled     int64
	// SetAside: the edge sends it nothing now. Checked is the time of
	// its last active check (zero before the first) and Detail that
	// check's result ("ok", or why it failed).
	SetAside bool
	Checked  time.Time
	Detail   string
	// Requests counts the requests sent to it by outcome: "1xx" … "5xx"
	// (its answer's status class), "connect_failure", "timeout",
	// "error" or "cancelled" (the client left).
	Requests map[string]uint64
}

// Stats returns every pool's state, by region.
func (ls *Layers) Stats() []LayerStats {
	ls.mu.Lock()
	pools := make([]*layerPool, 0, len(ls.pools))
	for _, p := range ls.pools {
		pools = append(pools, p)
	}
	ls.mu.Unlock()
	slices.SortFunc(pools, func(a, b *layerPool) int { return strings.Compare(a.region, b.region) })
	now := time.Now().UnixNano()
	out := make([]LayerStats, 0, len(pools))
	for _, p := range pools {
		st := LayerStats{Region: p.region, Down: p.downs.Load()}
		for _, e := range p.eps {
			_, _, n := e.least()
			es := LayerEndpointStats{Address: e.addr, Connections: n, Dialled: e.dialled.Load(), SetAside: e.aside.Load() > now, Requests: map[string]uint64{}}
			es.Checked, es.Detail = e.health.last()
			for i := range nLayerOutcomes {
				if v := e.outcomes[i].Load(); v > 0 {
					es.Requests[layerOutcomeName(i)] = v
				}
			}
			st.Endpoints = append(st.Endpoints, es)
		}
		out = append(out, st)
	}
	return out
}
