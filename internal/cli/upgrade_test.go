package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// childEnv makes the test binary run the spillway command line instead
// of the tests, so that process tests run the real CLI in a process of
// its own (as internal/soak does). SPILLWAY_UPGRADE_BIN=PATH runs a
// built binary instead.
const childEnv = "SPILLWAY_CLI_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// freeLoopbackPort returns a loopback port free a moment ago: for
// "udp", free for UDP and TCP both (a DNS frontend binds both, an HTTP/3
// one TCP and UDP; a UDP port alone was found taken for TCP on a busy
// machine, and the process then failed to start).
func freeLoopbackPort(t *testing.T, network string) int {
	t.Helper()
	if network == "udp" {
		for range 100 {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := ln.Addr().(*net.TCPAddr).Port
			pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
			ln.Close()
			if err == nil {
				pc.Close()
				return port
			}
		}
		t.Fatal("no loopback port free for both TCP and UDP in 100 tries")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// serveProc starts `spillway serve` args as a process of its own.
func serveProc(t *testing.T, name string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	exe, env := os.Args[0], append(os.Environ(), childEnv+"=1")
	if bin := os.Getenv("SPILLWAY_UPGRADE_BIN"); bin != "" {
		exe, env = bin, os.Environ()
	}
	cmd := exec.Command(exe, append([]string{"serve"}, args...)...)
	cmd.Env = env
	out := &bytes.Buffer{}
	w := &lockedWriter{w: out}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, out)
		}
	})
	return cmd, out
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// upgradeLoad counts requests and their outcomes.
type upgradeLoad struct {
	ok, lost, dnsOK, dnsLost atomic.Int64
	mu                       sync.Mutex
	errs                     []string
}

func (l *upgradeLoad) fail(format string, args ...any) {
	l.lost.Add(1)
	l.mu.Lock()
	if len(l.errs) < 10 {
		l.errs = append(l.errs, fmt.Sprintf(format, args...))
	}
	l.mu.Unlock()
}

// httpWorker sends GETs until stop: on one keep-alive connection (new
// false) or each on a new connection. A request is lost when the client
// gets an error or a status other than 200. The client is Go's, whose
// Transport resends an idempotent request once on a new connection when
// a reused keep-alive connection closes before any byte of the answer
// (net/http's rule, as browsers and most HTTP clients do); there are no
// retries beyond that.
func (l *upgradeLoad) httpWorker(url string, newConns bool, stop <-chan struct{}, max int64) {
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: newConns, MaxIdleConnsPerHost: 1}}
	defer cl.CloseIdleConnections()
	for l.ok.Load()+l.lost.Load() < max {
		select {
		case <-stop:
			return
		default:
		}
		resp, err := cl.Get(url)
		if err != nil {
			l.fail("GET: %v", err)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(body) != "ok" {
			l.fail("GET: %d %q %v", resp.StatusCode, body, err)
			continue
		}
		l.ok.Add(1)
	}
}

// dnsWorker sends UDP and TCP queries until stop; a query is lost when
// it gets no answer within 2 s (a resolver would try again; none is
// retried here).
func (l *upgradeLoad) dnsWorker(addr, network string, stop <-chan struct{}) {
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion("a.gslb.example.", dns.TypeA)
	for {
		select {
		case <-stop:
			return
		case <-time.After(5 * time.Millisecond):
		}
		r, _, err := c.Exchange(m, addr)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			l.dnsLost.Add(1)
			l.mu.Lock()
			if len(l.errs) < 10 {
				l.errs = append(l.errs, fmt.Sprintf("DNS %s: %v", network, err))
			}
			l.mu.Unlock()
			continue
		}
		l.dnsOK.Add(1)
	}
}

// TestUpgradeLosesNothing: a second spillway serve process takes the
// listening sockets (HTTP frontend, DNS UDP and TCP, admin) of the first
// over --upgrade-socket while a load generator runs; the first finishes
// its requests in flight and exits 0; no HTTP request and no DNS query
// is lost.
func TestUpgradeLosesNothing(t *testing.T) {
	if testing.Short() || runtime.GOOS != "linux" {
		t.Skip("process test (Linux, not -short)")
	}
	bln := slowBackend(t)

	dir := t.TempDir()
	httpPort, adminPort := freeLoopbackPort(t, "tcp"), freeLoopbackPort(t, "tcp")
	dnsPort := freeLoopbackPort(t, "udp")
	_, bport, _ := net.SplitHostPort(bln.Addr().String())
	cfg := fmt.Sprintf(`networkEndpointGroups:
- {name: neg, zone: us-east1-b, endpoints: [{ipAddress: 127.0.0.1, port: %s}]}
backendServices:
- {name: bs, backends: [{group: neg, balancingMode: RATE, maxRatePerEndpoint: 100000}]}
urlMaps:
- {name: um, defaultService: bs}
frontends:
- {name: fe, address: "127.0.0.1:%d", protocol: HTTP, urlMap: um}
- {name: dns, address: "127.0.0.1:%d", protocol: DNS}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  records:
  - {name: a, type: A, rrdatas: ["192.0.2.1"]}
`, bport, httpPort, dnsPort)
	cfgPath := filepath.Join(dir, "spillway.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "upgrade.sock")
	args := []string{"--config", cfgPath, "--admin", fmt.Sprintf("127.0.0.1:%d", adminPort), "--upgrade-socket", sock, "--watch", "0", "--procs", "2"}
	url := fmt.Sprintf("http://127.0.0.1:%d/", httpPort)

	old, oldLog := serveProc(t, "old", args...)
	waitUp(t, url, sock)

	var l upgradeLoad
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const maxRequests = 20000
	for i := range 6 {
		wg.Go(func() { l.httpWorker(url, i >= 4, stop, maxRequests) })
	}
	dnsAddr := fmt.Sprintf("127.0.0.1:%d", dnsPort)
	wg.Go(func() { l.dnsWorker(dnsAddr, "udp", stop) })
	wg.Go(func() { l.dnsWorker(dnsAddr, "tcp", stop) })
	for l.ok.Load() < 300 && l.lost.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	beforeUpgrade := l.ok.Load()

	_, newLog := serveProc(t, "new", args...)
	exited := make(chan error, 1)
	go func() { exited <- old.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the old process exited with %v, want 0", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the old process did not exit within 60 s of the upgrade")
	}
	atExit := l.ok.Load()
	// The new process alone serves now: 500 more requests.
	deadline := time.Now().Add(30 * time.Second)
	for l.ok.Load() < atExit+500 && time.Now().Before(deadline) && l.ok.Load()+l.lost.Load() < maxRequests {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("HTTP: %d answered 200 (%d before the upgrade began, %d by the time the old process exited), %d lost; DNS: %d answered, %d lost",
		l.ok.Load(), beforeUpgrade, atExit, l.lost.Load(), l.dnsOK.Load(), l.dnsLost.Load())
	if l.lost.Load() != 0 || l.dnsLost.Load() != 0 {
		t.Errorf("lost across the upgrade: %d HTTP requests, %d DNS queries: %v", l.lost.Load(), l.dnsLost.Load(), l.errs)
	}
	if l.ok.Load() < atExit+500 {
		t.Errorf("the new process answered %d requests after the old one exited, want 500", l.ok.Load()-atExit)
	}
	if !strings.Contains(oldLog.String(), "a new process took the listening sockets") ||
		!strings.Contains(newLog.String(), "took the listening sockets of the running spillway serve") {
		t.Errorf("the logs do not show the handoff")
	}
	// The admin listener moved too.
	if _, err := getHealthz(fmt.Sprintf("127.0.0.1:%d", adminPort)); err != nil {
		t.Errorf("admin listener after the upgrade: %v", err)
	}
}

func getHealthz(admin string) (string, error) {
	resp, err := http.Get("http://" + admin + "/healthz")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// waitUp waits until url answers and the upgrade socket exists.
func waitUp(t *testing.T, url, sock string) {
	t.Helper()
	waitUpWith(t, http.DefaultClient, url, sock)
}

// waitUpWith is waitUp with a client of its own.
func waitUpWith(t *testing.T, cl *http.Client, url, sock string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := cl.Get(url)
		if err == nil {
			resp.Body.Close()
			if _, err := os.Stat(sock); err == nil && resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("spillway serve not up after 60 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// slowBackend serves "ok" after 2 ms (so that requests are in flight at a
// handoff) on a loopback listener it returns, until the test ends.
func slowBackend(t *testing.T) net.Listener {
	t.Helper()
	backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * time.Millisecond)
		io.WriteString(w, "ok")
	})}
	bln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go backend.Serve(bln)
	t.Cleanup(func() { backend.Close() })
	return bln
}
