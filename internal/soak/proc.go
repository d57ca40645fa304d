package soak

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcStats is one sample of the proxy process.
type ProcStats struct {
	// At is the time since the soak started.
	At         Duration `json:"at"`
	RSSKiB     int      `json:"rssKiB"`
	FDs        int      `json:"fds"`
	Goroutines int      `json:"goroutines"`
	Threads    int      `json:"threads"`
	// Kinds sorts the descriptors (see fdKinds).
	Kinds map[string]int `json:"fdKinds,omitempty"`
	// RunqWait is the time the proxy's threads have spent runnable but
	// waiting for a CPU since it started (sum of
	// /proc/PID/task/*/schedstat), the measure of CPU starvation.
	RunqWait Duration `json:"runqWait"`
	// ByEntry counts goroutines by entry function (start, end and rest
	// samples only).
	ByEntry map[string]int `json:"goroutinesByEntry,omitempty"`
}

// NonPoolGoroutines is Goroutines minus those of pooled backend
// connections (when the profile was taken).
func (s ProcStats) NonPoolGoroutines() int { return s.Goroutines - poolGoroutines(s.ByEntry) }

// Backend returns the connections to backends, established (pooled or
// in use) and in any other state (CLOSE_WAIT: the backend closed, the
// proxy did not).
func (s ProcStats) Backend() (established, other int) {
	for k, n := range s.Kinds {
		switch {
		case k == kindBackend:
			established += n
		case strings.HasPrefix(k, kindBackend):
			other += n
		}
	}
	return established, other
}

// NonBackendFDs is FDs minus every connection to a backend.
func (s ProcStats) NonBackendFDs() int {
	e, o := s.Backend()
	return s.FDs - e - o
}

// proxyProc is the `spillway serve` subprocess.
type proxyProc struct {
	cmd     *exec.Cmd
	logPath string
	admin   string
	client  *http.Client // admin API, keep-alive
	// ports names the proxy's local ports (frontends, admin) and
	// backendPort is the lab's, for fdKinds.
	ports       map[int]string
	backendPort int
	exited      chan struct{}
	waitErr     error
}

// startProxy runs exe serve --config ... with its log in logPath.
func startProxy(ctx context.Context, exe string, env []string, f *files, logPath string) (*proxyProc, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("soak: proxy log: %w", err)
	}
	// Not CommandContext: the soak stops the proxy itself (SIGTERM, then
	// SIGKILL after a grace period) to see how it exits.
	cmd := exec.Command(exe, "serve", "--config", f.configPath, "--admin", f.adminAddr, "--watch", "0", "--log-level", "info", "--pprof")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("soak: start %s serve: %w", exe, err)
	}
	p := &proxyProc{
		cmd: cmd, logPath: logPath, admin: f.adminAddr, exited: make(chan struct{}),
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2}},
	}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := p.get(ctx, "/healthz", nil); err == nil {
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("soak: the proxy exited during start-up (%v); log %s:\n%s", p.waitErr, logPath, p.logTail(20))
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("soak: the proxy's admin API %s did not answer within 30s; log %s:\n%s", f.adminAddr, logPath, p.logTail(20))
		}
	}
}

// alive reports whether the process is still running.
func (p *proxyProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// get fetches an admin path into out (nil: discard); non-200 is an error.
func (p *proxyProc) get(ctx context.Context, path string, out *[]byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.admin+path, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	if out != nil {
		*out = body
	}
	return nil
}

// reload POSTs /reload and returns the status code and body.
func (p *proxyProc) reload(ctx context.Context) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.admin+"/reload", nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("POST /reload: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, strings.TrimSpace(string(body)), nil
}

// metrics returns the named unlabelled samples from /metrics.
func (p *proxyProc) metrics(ctx context.Context, names ...string) (map[string]float64, error) {
	var body []byte
	if err := p.get(ctx, "/metrics", &body); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, n := range names {
			if rest, ok := strings.CutPrefix(line, n+" "); ok {
				if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
					out[n] = v
				}
			}
		}
	}
	return out, nil
}

// sample reads RSS, threads and FDs from /proc and goroutines from the
// admin API's go_goroutines.
func (p *proxyProc) sample(ctx context.Context, at time.Duration) (ProcStats, error) {
	s := ProcStats{At: Duration(at)}
	pid := p.cmd.Process.Pid
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("soak: proxy status: %w", err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		switch k {
		case "VmRSS":
			s.RSSKiB, _ = strconv.Atoi(fs[0])
		case "Threads":
			s.Threads, _ = strconv.Atoi(fs[0])
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, fmt.Errorf("soak: proxy fds: %w", err)
	}
	s.FDs = len(fds)
	s.Kinds = p.fdKinds()
	s.RunqWait = Duration(runqWait(fmt.Sprintf("/proc/%d/task", pid)))
	m, err := p.metrics(ctx, "go_goroutines")
	if err != nil {
		return s, fmt.Errorf("soak: proxy goroutines: %w", err)
	}
	s.Goroutines = int(m["go_goroutines"])
	return s, nil
}

// stop sends SIGTERM and waits up to 15 s, then SIGKILL; it returns how
// the process ended.
func (p *proxyProc) stop() string {
	if !p.alive() {
		return fmt.Sprintf("had exited before the end: %v", p.waitErr)
	}
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.waitErr != nil {
			return fmt.Sprintf("SIGTERM: exited in %s with %v", time.Since(start).Round(time.Millisecond), p.waitErr)
		}
		return fmt.Sprintf("SIGTERM: exited cleanly in %s", time.Since(start).Round(time.Millisecond))
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return "SIGTERM: still running after 15s; killed"
	}
}

// logLines returns the proxy log's lines that contain any of the needles
// (at most limit), and how many there were.
func (p *proxyProc) logLines(limit int, needles ...string) ([]string, int) {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return nil, 0
	}
	var out []string
	n := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		for _, nd := range needles {
			if strings.Contains(line, nd) {
				n++
				if len(out) < limit {
					out = append(out, line)
				}
				break
			}
		}
	}
	return out, n
}

// logTail returns the last n lines of the proxy log.
func (p *proxyProc) logTail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// kindBackend is fdKinds' name for established connections to backends;
// other states get it with the state added.
const kindBackend = "to backends"

// tcpState names a /proc/net/tcp state.
func tcpState(hex string) string {
	switch hex {
	case "01":
		return "ESTABLISHED"
	case "02":
		return "SYN_SENT"
	case "03":
		return "SYN_RECV"
	case "04":
		return "FIN_WAIT1"
	case "05":
		return "FIN_WAIT2"
	case "06":
		return "TIME_WAIT"
	case "07":
		return "CLOSE"
	case "08":
		return "CLOSE_WAIT"
	case "09":
		return "LAST_ACK"
	case "0A":
		return "LISTEN"
	case "0B":
		return "CLOSING"
	}
	return "state " + hex
}

// fdKinds sorts the proxy's file descriptors: sockets by what they connect
// to (clients on a frontend port, backends on the backend port, the admin
// API, listeners) and everything else by kind.
func (p *proxyProc) fdKinds() map[string]int {
	ports, backendPort := p.ports, p.backendPort
	pid := p.cmd.Process.Pid
	type sock struct{ local, remote, state string }
	socks := map[string]sock{} // by inode
	for _, file := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, file))
		if err != nil {
			continue
		}
		for i, line := range strings.Split(string(data), "\n") {
			fs := strings.Fields(line)
			if i == 0 || len(fs) < 10 {
				continue
			}
			socks[fs[9]] = sock{local: fs[1], remote: fs[2], state: fs[3]}
		}
	}
	port := func(hexAddr string) int {
		_, h, ok := strings.Cut(hexAddr, ":")
		if !ok {
			return 0
		}
		v, _ := strconv.ParseInt(h, 16, 32)
		return int(v)
	}
	out := map[string]int{}
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return out
	}
	for _, e := range entries {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if err != nil {
			continue
		}
		inode, ok := strings.CutPrefix(link, "socket:[")
		if !ok {
			kind, _, _ := strings.Cut(link, ":")
			if strings.HasPrefix(link, "/") {
				kind = "file"
			}
			out[kind]++
			continue
		}
		s, ok := socks[strings.TrimSuffix(inode, "]")]
		switch {
		case !ok:
			out["socket (not TCP)"]++
		case s.state == "0A":
			out["listener"]++
		case port(s.remote) == backendPort && s.state == "01":
			out[kindBackend]++
		case port(s.remote) == backendPort:
			out[kindBackend+" ("+tcpState(s.state)+")"]++
		case ports[port(s.local)] != "":
			out[ports[port(s.local)]]++
		default:
			out["other TCP "+tcpState(s.state)]++
		}
	}
	return out
}

// algorithm returns the first backend service's loadBalancingAlgorithm
// in the health view (it tells the soak's two valid configs apart).
func (p *proxyProc) algorithm(ctx context.Context) (string, error) {
	var body []byte
	if err := p.get(ctx, "/health", &body); err != nil {
		return "", err
	}
	var h struct {
		Services []struct {
			Algorithm string `json:"loadBalancingAlgorithm"`
		} `json:"backendServices"`
	}
	if err := jsonUnmarshal(body, &h); err != nil {
		return "", err
	}
	if len(h.Services) == 0 {
		return "", fmt.Errorf("soak: the health view has no backend services")
	}
	return h.Services[0].Algorithm, nil
}

// logAround returns up to limit proxy log lines timestamped from before
// ahead of a failed request's start to its end (text handler lines begin
// with time=RFC3339).
func (p *proxyProc) logAround(list []outcome, before time.Duration, limit int) []string {
	if len(list) == 0 {
		return nil
	}
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return nil
	}
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		ts, ok := strings.CutPrefix(line, "time=")
		if !ok {
			continue
		}
		ts, _, _ = strings.Cut(ts, " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			continue
		}
		for _, o := range list {
			if !at.Before(o.Start.Add(-before)) && !at.After(o.End) {
				out = append(out, line)
				break
			}
		}
		if len(out) >= limit {
			break
		}
	}
	return out
}

// goroutines fetches the proxy's goroutine profile (pprof debug=1), writes
// it to path when path is not empty, and returns the goroutine counts by
// entry function (the last frame of each stack).
func (p *proxyProc) goroutines(ctx context.Context, path string) map[string]int {
	var body []byte
	if err := p.get(ctx, "/debug/pprof/goroutine?debug=1", &body); err != nil {
		return nil
	}
	if path != "" {
		_ = os.WriteFile(path, body, 0o644)
	}
	out := map[string]int{}
	for block := range strings.SplitSeq(string(body), "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		n := 0
		if _, err := fmt.Sscanf(lines[0], "%d @", &n); err != nil || n == 0 {
			continue
		}
		entry := "?"
		for _, l := range lines[1:] {
			if fs := strings.Fields(strings.TrimPrefix(l, "#")); len(fs) >= 2 {
				entry, _, _ = strings.Cut(fs[1], "+")
			}
		}
		out[entry] += n
	}
	return out
}

// poolGoroutines counts the goroutines of pooled backend connections of
// net/http's transport (a read and a write loop each), which live as long
// as the connection idles in the pool (600 s).
func poolGoroutines(byEntry map[string]int) int {
	n := 0
	for k, v := range byEntry {
		if strings.HasPrefix(k, "net/http.(*persistConn).") {
			n += v
		}
	}
	return n
}

// runqWait sums the run-queue wait (second field of schedstat, in ns) of
// every task under dir (/proc/PID/task or /proc/self/task).
func runqWait(dir string) time.Duration {
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	total := int64(0)
	for _, t := range tasks {
		data, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		if fs := strings.Fields(string(data)); len(fs) >= 2 {
			n, _ := strconv.ParseInt(fs[1], 10, 64)
			total += n
		}
	}
	return time.Duration(total)
}

// cpuPressure returns the machine's cumulative CPU pressure stall time
// ("some" total of /proc/pressure/cpu: time in which at least one task
// waited for a CPU), or 0 when the kernel does not report it.
func cpuPressure() time.Duration {
	data, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "some "); ok {
			for _, f := range strings.Fields(rest) {
				if v, ok := strings.CutPrefix(f, "total="); ok {
					us, _ := strconv.ParseInt(v, 10, 64)
					return time.Duration(us) * time.Microsecond
				}
			}
		}
	}
	return 0
}

// stallWatch measures how late a 50 ms ticker in the soak's own process
// fires: a late tick means the soak (load generator, backends, chaos) did
// not get a CPU.
type stallWatch struct {
	mu    sync.Mutex
	worst time.Duration
	at    time.Time
	over1 int // ticks more than 1 s late
}

func (w *stallWatch) run(ctx context.Context) {
	const every = 50 * time.Millisecond
	last := time.Now()
	for sleepCtx(ctx, every) {
		now := time.Now()
		late := now.Sub(last) - every
		last = now
		w.mu.Lock()
		if late > w.worst {
			w.worst, w.at = late, now
		}
		if late > time.Second {
			w.over1++
		}
		w.mu.Unlock()
	}
}
