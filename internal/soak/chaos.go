package soak

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/spillwaylb/spillway/internal/lab"
)

// window is a convergence window: from a zone kill, zone restart or
// endpoint flap until the health checks must have seen it.
type window struct {
	From, To time.Time
	Label    string
}

// ReloadRecord is one reload the chaos loop made.
type ReloadRecord struct {
	At     Duration `json:"at"`
	Config string   `json:"config"`
	Valid  bool     `json:"valid"`
	Status int      `json:"status"`
	// Applied tells whether the health view's loadBalancingAlgorithm
	// was the valid config's afterwards (SPRAY_TO_REGION for
	// with-policy, WATERFALL_BY_REGION for no-policy), or still the
	// previous one after an invalid config.
	Applied bool   `json:"applied"`
	Body    string `json:"body,omitempty"`
	Err     string `json:"error,omitempty"`
}

// Rotation is one certificate rotation.
type Rotation struct {
	At Duration `json:"at"`
	// Mode is how the files were replaced: "rename" (a new file renamed
	// over the old path) or "rewrite" (the same file truncated and
	// written).
	Mode   string `json:"mode"`
	Serial string `json:"serial"`
	// ObservedAfter is when a new TLS handshake first got the new
	// certificate (0: never, before the next rotation or the end).
	ObservedAfter Duration `json:"observedAfter,omitempty"`
	Observed      bool     `json:"observed"`
}

// chaos is the chaos loop's state; run owns it, the windows are read by
// classify after run returns.
type chaos struct {
	o      *Options
	f      *files
	bs     *lab.Backends
	proxy  *proxyProc
	rng    *rand.Rand
	start  time.Time
	winLen time.Duration
	logw   io.Writer

	mu           sync.Mutex // guards windows (read by the report)
	windows      []window
	zoneKills    int
	zoneRestarts int
	flaps        int
	reloads      []ReloadRecord
	rotations    []Rotation
	errs         []string
	timeline     []string // every event, as logged
	began, ended time.Time

	downZone  string
	downUntil time.Time
	flapAddr  string
	flapUntil time.Time
	nextCfg   int
	algorithm string    // the health view's, after the last reload
	pending   *Rotation // rotation not yet observed
	pendingSN *big.Int
}

func (c *chaos) logf(format string, args ...any) {
	now := time.Now()
	line := fmt.Sprintf("[%7.1fs] %s %s", now.Sub(c.start).Seconds(), now.UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	fmt.Fprintln(c.logw, line)
	c.mu.Lock()
	c.timeline = append(c.timeline, line)
	c.mu.Unlock()
}

func (c *chaos) since() Duration { return Duration(time.Since(c.start)) }

func (c *chaos) addWindow(label string) {
	now := time.Now()
	c.mu.Lock()
	c.windows = append(c.windows, window{From: now, To: now.Add(c.winLen), Label: fmt.Sprintf("%s at %.1fs", label, time.Since(c.start).Seconds())})
	c.mu.Unlock()
}

func (c *chaos) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.logf("ERROR %s", msg)
	c.mu.Lock()
	c.errs = append(c.errs, msg)
	c.mu.Unlock()
}

// run kills and restarts zones, flaps endpoints, reloads and rotates on
// the Options' schedule until ctx ends, then brings every backend back.
func (c *chaos) run(ctx context.Context, bctx context.Context) {
	o := c.o
	begin := time.Now()
	c.mu.Lock()
	c.began = begin
	c.mu.Unlock()
	nextZone := begin.Add(o.ZoneFirst)
	nextFlap := begin.Add(o.FlapFirst)
	nextReload := begin.Add(o.ReloadEvery)
	nextRotate := begin.Add(o.RotateFirst)
	nextCheck := begin
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			c.restoreAll(bctx)
			c.mu.Lock()
			c.ended = time.Now()
			c.mu.Unlock()
			return
		case <-tick.C:
		}
		if ctx.Err() != nil {
			continue // the chaos phase is over: restore on the next turn
		}
		now := time.Now()
		if c.downZone != "" && now.After(c.downUntil) {
			c.restartZone(bctx)
		}
		if c.flapAddr != "" && now.After(c.flapUntil) {
			c.restoreEndpoint(bctx)
		}
		if now.After(nextZone) {
			nextZone = nextZone.Add(o.ZoneEvery)
			if c.downZone == "" {
				c.killZone()
			}
		}
		if now.After(nextFlap) {
			nextFlap = nextFlap.Add(o.FlapEvery)
			if c.flapAddr == "" {
				c.flapEndpoint()
			}
		}
		if now.After(nextReload) {
			nextReload = nextReload.Add(o.ReloadEvery)
			c.reload(bctx)
		}
		if now.After(nextRotate) {
			nextRotate = nextRotate.Add(o.RotateEvery)
			c.rotate()
		}
		if c.pending != nil && now.After(nextCheck) {
			nextCheck = now.Add(time.Second)
			c.checkRotation()
		}
	}
}

func (c *chaos) killZone() {
	zones := c.bs.Zones()
	z := zones[c.rng.IntN(len(zones))]
	if err := c.bs.StopListeners(z); err != nil {
		c.fail("kill zone %s: %v", z, err)
		return
	}
	c.downZone, c.downUntil = z, time.Now().Add(c.o.ZoneDown)
	c.zoneKills++
	c.addWindow("zone " + z + " killed")
	c.logf("zone %s killed (for %s)", z, c.o.ZoneDown)
}

func (c *chaos) restartZone(ctx context.Context) {
	z := c.downZone
	if err := c.bs.Recover(ctx, z); err != nil {
		c.fail("restart zone %s: %v", z, err)
		return
	}
	c.downZone = ""
	c.zoneRestarts++
	c.addWindow("zone " + z + " restarted")
	c.logf("zone %s restarted", z)
}

func (c *chaos) flapEndpoint() {
	var candidates []string
	for _, a := range c.bs.Addrs() {
		if c.bs.ZoneOf(a) != c.downZone {
			candidates = append(candidates, a)
		}
	}
	a := candidates[c.rng.IntN(len(candidates))]
	if err := c.bs.StopEndpoint(a); err != nil {
		c.fail("flap %s: %v", a, err)
		return
	}
	c.flapAddr, c.flapUntil = a, time.Now().Add(c.o.FlapDown)
	c.flaps++
	c.addWindow("endpoint " + a + " stopped")
	c.logf("endpoint %s (%s) stopped (for %s)", a, c.bs.ZoneOf(a), c.o.FlapDown)
}

func (c *chaos) restoreEndpoint(ctx context.Context) {
	a := c.flapAddr
	// A zone kill in between may have stopped it too; StartEndpoint is a
	// no-op for a running backend, and a killed zone's Recover starts it.
	if c.bs.ZoneOf(a) != c.downZone {
		if err := c.bs.StartEndpoint(ctx, a); err != nil {
			c.fail("restore %s: %v", a, err)
			return
		}
	}
	c.flapAddr = ""
	c.addWindow("endpoint " + a + " restarted")
	c.logf("endpoint %s restarted", a)
}

// restoreAll brings back whatever is down at the end of the chaos phase.
func (c *chaos) restoreAll(ctx context.Context) {
	if c.downZone != "" {
		c.restartZone(ctx)
	}
	if c.flapAddr != "" {
		c.restoreEndpoint(ctx)
	}
	if c.pending != nil {
		c.checkRotation()
	}
}

// reload writes the next config of the cycle (valid A, valid B, invalid)
// and POSTs /reload.
func (c *chaos) reload(ctx context.Context) {
	// The cycle starts with B: the proxy started on A.
	order := []int{1, 2, 0}
	k := order[c.nextCfg%len(order)]
	c.nextCfg++
	rec := ReloadRecord{At: c.since(), Valid: k < 2}
	data := c.f.invalid
	rec.Config = "invalid (unknown urlMap)"
	if k < 2 {
		data, rec.Config = c.f.valid[k], c.f.validNames[k]
	}
	want := c.algorithm // an invalid config must change nothing
	if k < 2 {
		want = c.f.algorithms[k]
	}
	if err := writeAtomic(c.f.configPath, data); err != nil {
		rec.Err = err.Error()
	} else {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		status, body, err := c.proxy.reload(rctx)
		rec.Status, rec.Body = status, truncate(body, 300)
		if err != nil {
			rec.Err = err.Error()
		}
		got, err := c.proxy.algorithm(rctx)
		cancel()
		if err != nil {
			rec.Err += " health view: " + err.Error()
		}
		rec.Applied = got == want
		if got != "" {
			c.algorithm = got
		}
	}
	c.mu.Lock()
	c.reloads = append(c.reloads, rec)
	c.mu.Unlock()
	c.logf("reload %s: %d %s (health view: %s, as expected: %v)", rec.Config, rec.Status, firstLine(rec.Body+rec.Err), c.algorithm, rec.Applied)
}

// rotate replaces the frontend's certificate files, alternating rename
// and in-place rewrite.
func (c *chaos) rotate() {
	mode := "rename"
	if len(c.rotations)%2 == 1 {
		mode = "rewrite"
	}
	sn, err := c.f.rotateCertMode(mode == "rewrite")
	if err != nil {
		c.fail("rotate certificate: %v", err)
		return
	}
	if c.pending != nil {
		c.checkRotation()
	}
	c.rotations = append(c.rotations, Rotation{At: c.since(), Mode: mode, Serial: sn.Text(16)})
	c.pending, c.pendingSN = &c.rotations[len(c.rotations)-1], sn
	c.logf("certificate rotated (%s, serial %s)", mode, sn.Text(16))
}

// checkRotation makes a fresh TLS handshake and records whether the
// pending rotation's certificate is served. It is only recorded, never
// asserted.
func (c *chaos) checkRotation() {
	d := &net.Dialer{Timeout: 2 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", c.f.httpsAddr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // checking which certificate is served
	if err != nil {
		return
	}
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) > 0 && certs[0].SerialNumber.Cmp(c.pendingSN) == 0 {
		c.pending.Observed = true
		c.pending.ObservedAfter = c.since() - c.pending.At
		c.logf("new certificate observed %.1fs after the rotation", time.Duration(c.pending.ObservedAfter).Seconds())
		c.pending, c.pendingSN = nil, nil
	}
}

// coverage returns the share of the chaos phase covered by windows.
func (c *chaos) coverage() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.windows) == 0 || c.ended.IsZero() {
		return 0
	}
	covered := time.Duration(0)
	var end time.Time // of the union so far; windows are in start order
	for _, w := range c.windows {
		from := w.From
		if from.Before(end) {
			from = end
		}
		to := w.To
		if to.After(c.ended) {
			to = c.ended
		}
		if to.After(from) {
			covered += to.Sub(from)
			end = to
		}
	}
	return covered.Seconds() / c.ended.Sub(c.began).Seconds()
}

// classify sets o.Window for every outcome that overlaps a window: the
// latest window that began before the request ended (so a 5xx right after
// a zone kill is not blamed on an earlier flap whose window is still
// open).
func (c *chaos) classify(list []outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range list {
		o := &list[i]
		for _, w := range slices.Backward(c.windows) {
			if o.Start.Before(w.To) && o.End.After(w.From) {
				o.Window = w.Label
				break
			}
		}
	}
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}
