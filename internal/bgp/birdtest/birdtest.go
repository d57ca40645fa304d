// Package birdtest runs a BIRD 2 routing daemon (Debian's bird2) for
// tests: its own config file, log and control socket in a temporary
// directory, started and stopped by PID, and asked with birdc which
// routes it holds. Tests that need it skip when bird is not installed,
// unless SPILLWAY_REQUIRE_BIRD is set (CI sets it), which fails them
// instead.
package birdtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Peer is one BGP protocol of the daemon.
type Peer struct {
	// Name is the protocol's name in bird (letters, digits, '_'; not a
	// keyword of bird's config language such as "md5" or "ra").
	Name string
	// Local and Port are where bird listens for this session; LocalASN
	// its AS.
	Local    netip.Addr
	Port     int
	LocalASN uint32
	// Neighbor is the address the session comes from (Spillway's),
	// PeerASN its AS. NeighborPort, when set, makes bird also dial the
	// neighbor there (else it only waits: passive).
	Neighbor     netip.Addr
	NeighborPort int
	PeerASN      uint32
	// HoldTime in seconds (0: bird's default, 240).
	HoldTime int
	// Password is the TCP MD5 password ("" for none).
	Password string
	// Export are prefixes bird announces to the neighbor (static
	// blackhole routes), to check that they go no further.
	Export []netip.Prefix
}

// Bird is a running bird daemon.
type Bird struct {
	Dir, Socket string
	birdc       string
	pid         int
	done        chan struct{}
}

// Require returns the paths of bird and birdc, skipping the test when
// they are missing (failing it under SPILLWAY_REQUIRE_BIRD).
func Require(t testing.TB) (bird, birdc string) {
	t.Helper()
	for _, dir := range []string{"", "/usr/sbin/", "/usr/local/sbin/"} {
		b, errB := exec.LookPath(dir + "bird")
		c, errC := exec.LookPath(dir + "birdc")
		if errB == nil && errC == nil {
			return b, c
		}
	}
	if os.Getenv("SPILLWAY_REQUIRE_BIRD") != "" {
		t.Fatal("bird and birdc not found and SPILLWAY_REQUIRE_BIRD is set (fix: apt-get install -y bird2)")
	}
	t.Skip("bird2 is not installed: the BGP tests against a real router skip (apt-get install -y bird2 runs them)")
	return "", ""
}

// FreePort returns a TCP port free on addr now.
func FreePort(t testing.TB, addr netip.Addr) int {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Config returns bird's configuration for peers.
func Config(routerID string, peers ...Peer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "router id %s;\nlog stderr all;\nprotocol device {}\n", routerID)
	for _, p := range peers {
		fam := "ipv4"
		if p.Local.Is6() {
			fam = "ipv6"
		}
		export := "none"
		if len(p.Export) > 0 {
			export = "where proto = \"" + p.Name + "_static\""
			fmt.Fprintf(&b, "protocol static %s_static {\n  %s;\n", p.Name, fam)
			for _, e := range p.Export {
				fmt.Fprintf(&b, "  route %s blackhole;\n", e)
			}
			b.WriteString("}\n")
		}
		fmt.Fprintf(&b, "protocol bgp %s {\n  local %s port %d as %d;\n  neighbor %s", p.Name, p.Local, p.Port, p.LocalASN, p.Neighbor)
		if p.NeighborPort != 0 {
			fmt.Fprintf(&b, " port %d", p.NeighborPort)
		}
		fmt.Fprintf(&b, " as %d;\n  multihop;\n", p.PeerASN)
		if p.NeighborPort == 0 {
			b.WriteString("  passive on;\n")
		}
		if p.HoldTime > 0 {
			fmt.Fprintf(&b, "  hold time %d;\n", p.HoldTime)
		}
		if p.Password != "" {
			fmt.Fprintf(&b, "  password %q;\n", p.Password)
		}
		fmt.Fprintf(&b, "  connect retry time 1;\n  error wait time 1, 5;\n  %s { import all; export %s; };\n}\n", fam, export)
	}
	return b.String()
}

// Start runs bird (router ID 192.0.2.254) with peers until the test
// ends.
func Start(t testing.TB, peers ...Peer) *Bird {
	t.Helper()
	return StartRouter(t, "192.0.2.254", peers...)
}

// StartRouter is Start with a router ID of its own (two routers in one
// test need two).
func StartRouter(t testing.TB, routerID string, peers ...Peer) *Bird {
	t.Helper()
	bird, birdc := Require(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(conf, []byte(Config(routerID, peers...)), 0o600); err != nil {
		t.Fatal(err)
	}
	b := &Bird{Dir: dir, Socket: filepath.Join(dir, "bird.ctl"), birdc: birdc, done: make(chan struct{})}
	logf, err := os.Create(filepath.Join(dir, "bird.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bird, "-f", "-c", conf, "-s", b.Socket, "-P", filepath.Join(dir, "bird.pid"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("bird: %v", err)
	}
	b.pid = cmd.Process.Pid
	go func() { cmd.Wait(); logf.Close(); close(b.done) }()
	t.Cleanup(func() { b.Stop(); b.dumpLogOnFailure(t) })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := b.Birdc("show status"); err == nil {
			return b
		}
		select {
		case <-b.done:
			log, _ := os.ReadFile(filepath.Join(dir, "bird.log"))
			t.Fatalf("bird exited at start:\n%s", log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("bird's control socket did not answer within 10 s")
		}
	}
}

// Stop ends the daemon (SIGTERM to its PID, then SIGKILL after 5 s).
func (b *Bird) Stop() {
	select {
	case <-b.done:
		return
	default:
	}
	syscall.Kill(b.pid, syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		syscall.Kill(b.pid, syscall.SIGKILL)
		<-b.done
	}
}

func (b *Bird) dumpLogOnFailure(t testing.TB) {
	if t.Failed() {
		log, _ := os.ReadFile(filepath.Join(b.Dir, "bird.log"))
		t.Logf("bird's log:\n%s", log)
	}
}

// Birdc runs one birdc command and returns its output.
func (b *Bird) Birdc(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, b.birdc, append([]string{"-s", b.Socket}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("birdc %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Route is one route bird holds for a prefix.
type Route struct {
	// Protocol is the BGP protocol (Peer.Name) it came from.
	Protocol string
	ASPath   []uint32
	NextHop  string
	// MED is the MULTI_EXIT_DISC, -1 when absent.
	MED int64
}

// Routes returns the routes bird holds for prefix (exactly it).
func (b *Bird) Routes(prefix netip.Prefix) ([]Route, error) {
	out, err := b.Birdc("show", "route", prefix.String(), "all")
	if strings.Contains(out, "Network not found") {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseRoutes(out, prefix), nil
}

// ParseRoutes reads `birdc show route PREFIX all` output.
func ParseRoutes(out string, prefix netip.Prefix) []Route {
	var rs []Route
	var cur *Route
	for _, line := range strings.Split(out, "\n") {
		trim := strings.TrimSpace(line)
		switch {
		case strings.Contains(line, "[") && (strings.HasPrefix(line, prefix.String()) || strings.HasPrefix(line, " ")) && !strings.HasPrefix(line, "\t"):
			f := strings.Fields(line[strings.Index(line, "[")+1:])
			if len(f) == 0 {
				continue
			}
			rs = append(rs, Route{Protocol: f[0], MED: -1})
			cur = &rs[len(rs)-1]
		case cur == nil:
		case strings.HasPrefix(trim, "BGP.as_path:"):
			for _, n := range strings.Fields(strings.TrimPrefix(trim, "BGP.as_path:")) {
				if v, err := strconv.ParseUint(n, 10, 32); err == nil {
					cur.ASPath = append(cur.ASPath, uint32(v))
				}
			}
		case strings.HasPrefix(trim, "BGP.next_hop:"):
			cur.NextHop = strings.TrimSpace(strings.TrimPrefix(trim, "BGP.next_hop:"))
		case strings.HasPrefix(trim, "BGP.med:"):
			cur.MED, _ = strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(trim, "BGP.med:")), 10, 64)
		}
	}
	return rs
}

// RouteFrom returns the route for prefix that came from protocol.
func (b *Bird) RouteFrom(prefix netip.Prefix, protocol string) (Route, bool, error) {
	rs, err := b.Routes(prefix)
	if err != nil {
		return Route{}, false, err
	}
	for _, r := range rs {
		if r.Protocol == protocol {
			return r, true, nil
		}
	}
	return Route{}, false, nil
}

// WaitRoute polls (every 20 ms, up to timeout) until bird holds a route
// for prefix from protocol (present) or none (!present) and returns when
// it first saw it; the route seen last, and an error on timeout.
func (b *Bird) WaitRoute(prefix netip.Prefix, protocol string, present bool, timeout time.Duration) (time.Time, Route, error) {
	deadline := time.Now().Add(timeout)
	for {
		r, ok, err := b.RouteFrom(prefix, protocol)
		now := time.Now()
		if err == nil && ok == present {
			return now, r, nil
		}
		if now.After(deadline) {
			if err == nil {
				err = fmt.Errorf("bird: route %s from %s present=%v, still %v after %s", prefix, protocol, present, ok, timeout)
			}
			return now, r, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Protocol returns the state of a protocol as `show protocols` says it
// (e.g. "Established", "Active"), "" when unknown.
func (b *Bird) Protocol(name string) string {
	out, err := b.Birdc("show", "protocols", name)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[0] == name {
			return f[5]
		}
		if len(f) >= 4 && f[0] == name {
			return f[3]
		}
	}
	return ""
}

// WaitProtocol polls until protocol's state is want, or timeout.
func (b *Bird) WaitProtocol(name, want string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		got := b.Protocol(name)
		if got == want {
			return nil
		}
		if time.Now().After(deadline) {
			out, _ := b.Birdc("show", "protocols", "all", name)
			return fmt.Errorf("bird: protocol %s is %q after %s, want %q:\n%s", name, got, timeout, want, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Log returns bird's log so far.
func (b *Bird) Log() string {
	log, _ := os.ReadFile(filepath.Join(b.Dir, "bird.log"))
	return string(bytes.TrimSpace(log))
}

// Since returns when protocol name entered its state, as `show
// protocols` says it (e.g. "14:33:47.304"), as a time of day. bird
// derives the time it shows from its monotonic clock at each query, so
// two queries may differ by a few milliseconds for the same state
// change: compare with SameSince.
func (b *Bird) Since(name string) (time.Duration, error) {
	out, err := b.Birdc("show", "protocols", name)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 5 && f[0] == name {
			t, err := time.Parse("15:04:05.000", f[4])
			if err != nil {
				return 0, fmt.Errorf("bird: protocol %s since %q: %w", name, f[4], err)
			}
			return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second + time.Duration(t.Nanosecond()), nil
		}
	}
	return 0, fmt.Errorf("bird: no protocol %s in %s", name, out)
}

// SameSince reports whether two Since readings are the same state
// change (within 250 ms; a session that restarts takes longer than
// that to come back).
func SameSince(a, b time.Duration) bool {
	d := a - b
	return d > -250*time.Millisecond && d < 250*time.Millisecond
}
