// Package embedded runs an etcd member inside the Spillway process
// (etcd's server/v3/embed package), so a small fleet needs no separate
// etcd: `spillway serve --fleet-embedded` and `spillway lab --fleet`.
// Members talk plain HTTP to each other and to their clients; the
// package is meant for trying fleet mode and for labs, not for a
// production etcd (which wants peer and client TLS, and its own
// operations: backups, member replacement).
package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/logutil"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// DefaultClientURL is the client URL of a member when none is given.
const DefaultClientURL = "http://127.0.0.1:2379"

// Peer is one member of the initial cluster: its name and peer URL.
type Peer struct {
	Name string
	URL  url.URL
}

// ParseCluster parses an initial cluster, NAME=http://HOST:PORT,... (as
// etcd's --initial-cluster). Names must be unique and URLs plain HTTP
// with a host and a numeric port. flag names the flag in errors.
func ParseCluster(flag, s string) ([]Peer, error) {
	var out []Peer
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, raw, ok := strings.Cut(part, "=")
		if !ok || name == "" || strings.ContainsAny(name, "/ ") {
			return nil, fmt.Errorf("%s: %q is not NAME=http://HOST:PORT (fix: e.g. %s lb-a=http://10.0.0.5:2380,lb-b=http://10.0.0.6:2380,lb-c=http://10.0.0.7:2380)", flag, part, flag)
		}
		u, err := ParseURL(flag, raw)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out, func(p Peer) bool { return p.Name == name }) {
			return nil, fmt.Errorf("%s: member %s is named twice (fix: give each member one NAME=URL)", flag, name)
		}
		if slices.ContainsFunc(out, func(p Peer) bool { return p.URL.Host == u.Host }) {
			return nil, fmt.Errorf("%s: two members share the peer address %s (fix: give each member its own HOST:PORT)", flag, u.Host)
		}
		out = append(out, Peer{Name: name, URL: *u})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no members (fix: give NAME=http://HOST:PORT for each member, e.g. lb-a=http://127.0.0.1:2380)", flag)
	}
	return out, nil
}

// ParseURL parses a member URL: http://HOST:PORT with a numeric port
// 1-65535 and nothing after it. flag names the flag in errors.
func ParseURL(flag, raw string) (*url.URL, error) {
	if !strings.Contains(raw, "://") {
		return nil, fmt.Errorf("%s: %q is not http://HOST:PORT (fix: e.g. http://127.0.0.1:2380)", flag, raw)
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %q: %w (fix: give http://HOST:PORT)", flag, raw, err)
	}
	if u.Scheme == "https" {
		return nil, fmt.Errorf("%s: %q: embedded members speak plain HTTP only (fix: use http://, or run etcd yourself with TLS and give --fleet etcds://...)", flag, raw)
	}
	if u.Scheme != "http" || u.Hostname() == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%s: %q is not http://HOST:PORT (fix: e.g. http://127.0.0.1:2380)", flag, raw)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil || p < 1 || p > 65535 {
		return nil, fmt.Errorf("%s: %q needs a numeric port 1-65535 (fix: e.g. http://%s:2380)", flag, raw, u.Hostname())
	}
	if err := specified(flag, u); err != nil {
		return nil, err
	}
	u.Path = ""
	return u, nil
}

// specified refuses a URL on an unspecified host (0.0.0.0, ::): etcd
// advertises the client and peer URLs as given, so the other members,
// and the instances that learn the client URLs from the member list,
// would dial 0.0.0.0, which is not this member.
func specified(flag string, u *url.URL) error {
	if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%s: %q: an unspecified host is advertised to the other members as is, and they cannot reach this member there (fix: give the address the others reach this host at, e.g. http://10.0.0.5:%s)", flag, u.String(), u.Port())
	}
	return nil
}

// Options configure a member.
type Options struct {
	// Name is this member's name; it must be one of Cluster's.
	Name string
	// Cluster is the initial cluster, this member included. It matters
	// only the first time a data directory is used: afterwards the
	// membership is read from Dir.
	Cluster []Peer
	// ClientURL is where this member serves clients (default
	// DefaultClientURL).
	ClientURL *url.URL
	// Dir is the data directory (created if missing).
	Dir string
	// LogLevel is etcd's own log level (default "error"): etcd logs to
	// stderr in its own JSON format. It does not apply with Logger.
	LogLevel string
	// Logger, when set, receives etcd's own log instead of stderr; its
	// core decides the level (e.g. a test's log, errors only).
	Logger *zap.Logger
	// ClusterState is etcd's initial cluster state, used (as Cluster)
	// only the first time a data directory is used: "new" (the
	// default) bootstraps a new cluster with the Cluster members;
	// "existing" joins a running cluster that already lists this
	// member (etcdctl member add), e.g. to replace a member whose data
	// directory was lost.
	ClusterState string
}

// Member is an etcd member running in this process.
type Member struct {
	e       *embed.Etcd
	client  string
	close   sync.Once
	closing atomic.Bool
	stopped chan struct{}
	err     error // why it stopped; set before stopped is closed
}

// DefaultDir is the data directory used when none is given: under the
// OS temporary directory, one per member name.
func DefaultDir(name string) string {
	return filepath.Join(os.TempDir(), "spillway-etcd-"+name)
}

// Start starts the member and returns once its listeners are bound; it
// does not wait for the cluster to have a quorum (see Ready). The
// member's client listener is at ClientAddr.
func Start(o Options) (*Member, error) {
	i := slices.IndexFunc(o.Cluster, func(p Peer) bool { return p.Name == o.Name })
	if i < 0 {
		names := make([]string, len(o.Cluster))
		for j, p := range o.Cluster {
			names[j] = p.Name
		}
		return nil, fmt.Errorf("embedded etcd: this member %q is not in the initial cluster (fix: name it one of %s)", o.Name, strings.Join(names, ", "))
	}
	if o.ClientURL == nil {
		u, _ := url.Parse(DefaultClientURL)
		o.ClientURL = u
	}
	if err := specified("embedded etcd: client URL", o.ClientURL); err != nil {
		return nil, err
	}
	if err := specified("embedded etcd: peer URL", &o.Cluster[i].URL); err != nil {
		return nil, err
	}
	if o.ClientURL.Host == o.Cluster[i].URL.Host {
		return nil, fmt.Errorf("embedded etcd: the client URL %s is this member's peer URL (fix: give them different ports, e.g. 2379 and 2380)", o.ClientURL.String())
	}
	if o.LogLevel == "" {
		o.LogLevel = "error"
	}
	switch o.ClusterState {
	case "":
		o.ClusterState = embed.ClusterStateFlagNew
	case embed.ClusterStateFlagNew, embed.ClusterStateFlagExisting:
	default:
		return nil, fmt.Errorf("embedded etcd: cluster state %q (fix: give new or existing)", o.ClusterState)
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded etcd: data directory: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = o.Name
	cfg.Dir = o.Dir
	cfg.LogLevel = o.LogLevel
	m := &Member{client: o.ClientURL.Host, stopped: make(chan struct{})}
	lg, err := etcdLogger(o, &m.closing)
	if err != nil {
		return nil, err
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	cfg.ListenClientUrls = []url.URL{*o.ClientURL}
	cfg.AdvertiseClientUrls = []url.URL{*o.ClientURL}
	cfg.ListenPeerUrls = []url.URL{o.Cluster[i].URL}
	cfg.AdvertisePeerUrls = []url.URL{o.Cluster[i].URL}
	parts := make([]string, len(o.Cluster))
	for j, p := range o.Cluster {
		parts[j] = p.Name + "=" + p.URL.String()
	}
	cfg.InitialCluster = strings.Join(parts, ",")
	cfg.InitialClusterToken = "spillway-fleet"
	cfg.ClusterState = o.ClusterState
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd member %s (client %s, peer %s, data %s, cluster state %s): %w (%s)", o.Name, o.ClientURL.Host, o.Cluster[i].URL.Host, o.Dir, o.ClusterState, err, startFix(err, o))
	}
	m.e = e
	if len(e.Clients) > 0 {
		m.client = e.Clients[0].Addr().String()
	}
	go m.watch(o)
	return m, nil
}

// etcdLogger is etcd's logger for o: o.Logger, or JSON lines on stderr
// at o.LogLevel as etcd's own default. Either way it drops what etcd
// logs below fatal while the member is closed on purpose (closing is
// set): etcd logs each listener it closes as an error ("setting up
// serving from embedded etcd failed"), which says nothing wrong.
func etcdLogger(o Options, closing *atomic.Bool) (*zap.Logger, error) {
	lg := o.Logger
	if lg == nil {
		lcfg := logutil.DefaultZapLoggerConfig
		lcfg.Level = zap.NewAtomicLevelAt(logutil.ConvertToZapLevel(o.LogLevel))
		var err error
		if lg, err = lcfg.Build(); err != nil {
			return nil, fmt.Errorf("embedded etcd: logger: %w", err)
		}
	}
	return lg.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return quietClose{Core: c, closing: closing}
	})), nil
}

// quietClose is a zap core that drops entries below fatal while closing
// is set.
type quietClose struct {
	zapcore.Core
	closing *atomic.Bool
}

// With keeps the filter on the derived core.
func (q quietClose) With(fields []zapcore.Field) zapcore.Core {
	return quietClose{Core: q.Core.With(fields), closing: q.closing}
}

// Check drops the entry while closing unless it is fatal (or worse).
func (q quietClose) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level < zapcore.FatalLevel && q.closing.Load() {
		return ce
	}
	return q.Core.Check(e, ce)
}

// watch waits for the member to stop: a listener that fails, or the
// server stopping on its own (removed from the cluster, a raft or disk
// error). Then it closes the member, so its listeners are released and
// clients fail over to the other members as for a dead one, and
// records why unless Close stopped it.
func (m *Member) watch(o Options) {
	var err error
	select {
	case err = <-m.e.Err():
		if err == nil {
			err = errors.New("etcd's listeners stopped")
		}
	case <-m.e.Server.StopNotify():
		err = errors.New("etcd server stopped")
	}
	if !m.closing.Load() {
		m.err = fmt.Errorf("embedded etcd member %s (data %s) stopped: %w (fix: read etcd's log (--fleet-embedded-log-level warn) and check the data directory's disk, then restart the instance; if etcdctl member list no longer shows %s, it was removed: etcdctl member add it and restart with an empty data directory and --fleet-embedded-state existing. Meanwhile the instance follows the fleet through the other members if it knows them, else serves its last config, stale)", o.Name, o.Dir, err, o.Name)
	}
	m.Close()
	close(m.stopped)
}

// Stopped is closed once the member has stopped, whether by Close or
// on its own; Err then says why.
func (m *Member) Stopped() <-chan struct{} { return m.stopped }

// Err is why the member stopped on its own, once Stopped is closed;
// nil while it runs or when Close stopped it.
func (m *Member) Err() error {
	select {
	case <-m.stopped:
		return m.err
	default:
		return nil
	}
}

// startFix is the fix for a failed start: etcd's error says what
// failed, this says what to do about it.
func startFix(err error, o Options) string {
	switch {
	case strings.Contains(err.Error(), "has already been bootstrapped"):
		// etcd's bootstrap with state "new" on an empty data directory
		// when the cluster (reached through its peers) lists this member.
		return fmt.Sprintf("the cluster already has a member %s, so this member lost its data directory %s (e.g. a temporary directory cleared on reboot) or another data directory was given; "+
			"fix: restore that data directory, or, with the cluster's quorum up, run etcdctl member remove ID (the ID etcdctl member list shows for %s) and etcdctl member add %s --peer-urls=%s, "+
			"empty %s and restart with --fleet-embedded-state existing; keep --fleet-data on persistent storage",
			o.Name, o.Dir, o.Name, o.Name, peerURL(o), o.Dir)
	case o.ClusterState == embed.ClusterStateFlagExisting:
		return fmt.Sprintf("fix: with --fleet-embedded-state existing the running cluster must already list this member: run etcdctl member add %s --peer-urls=%s first and start with an empty data directory; or, if the data directory holds another cluster's member, give another one", o.Name, peerURL(o))
	}
	return "fix: free the ports, or, if the data directory holds another cluster's member, give another data directory"
}

func peerURL(o Options) string {
	for _, p := range o.Cluster {
		if p.Name == o.Name {
			return p.URL.String()
		}
	}
	return ""
}

// ClientAddr is the host:port of the member's client listener.
func (m *Member) ClientAddr() string { return m.client }

// Ready waits until the member has joined a cluster with a quorum (or
// ctx ends, or the member stops).
func (m *Member) Ready(ctx context.Context) error {
	select {
	case <-m.e.Server.ReadyNotify():
		return nil
	case <-m.stopped:
		if m.err != nil {
			return m.err
		}
		return errors.New("embedded etcd stopped before it was ready")
	case <-ctx.Done():
		return fmt.Errorf("embedded etcd not ready: %w", ctx.Err())
	}
}

// Close stops the member (gracefully: it hands over raft leadership
// first when it leads). Closing again does nothing.
func (m *Member) Close() {
	m.close.Do(func() {
		m.closing.Store(true)
		m.e.Close()
	})
}

// FreeLoopbackURL returns http://127.0.0.1:PORT for a port that was free
// a moment ago (for a lab's single member).
func FreeLoopbackURL() (*url.URL, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: free loopback port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return &url.URL{Scheme: "http", Host: addr}, nil
}

// StartSingle starts a fresh single-member cluster named name on two
// free loopback ports with its data in dir, and waits (up to timeout)
// until it serves: the lab's etcd. dir must be this member's alone: it
// is emptied before each attempt. A port taken between choosing and
// binding is retried with new ports.
func StartSingle(ctx context.Context, name, dir string, timeout time.Duration) (*Member, error) {
	var lastErr error
	for range 5 {
		// A failed start may have left a half-made member behind.
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("embedded etcd: clear data directory: %w", err)
		}
		client, err := FreeLoopbackURL()
		if err != nil {
			return nil, err
		}
		peer, err := FreeLoopbackURL()
		if err != nil {
			return nil, err
		}
		// etcd's own log stays quiet ("fatal"): a lab's real failures
		// come back as errors from its clients.
		m, err := Start(Options{Name: name, Cluster: []Peer{{Name: name, URL: *peer}}, ClientURL: client, Dir: dir, LogLevel: "fatal"})
		if err != nil {
			lastErr = err
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		err = m.Ready(rctx)
		cancel()
		if err != nil {
			m.Close()
			return nil, err
		}
		return m, nil
	}
	return nil, lastErr
}
