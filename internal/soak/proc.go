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
}

// proxyProc is the `spillway serve` subprocess.
type proxyProc struct {
	cmd     *exec.Cmd
	logPath string
	admin   string
	client  *http.Client // admin API, keep-alive
	exited  chan struct{}
	waitErr error
}

// startProxy runs exe serve --config ... with its log in logPath.
func startProxy(ctx context.Context, exe string, env []string, f *files, logPath string) (*proxyProc, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("soak: proxy log: %w", err)
	}
	// Not CommandContext: the soak stops the proxy itself (SIGTERM, then
	// SIGKILL after a grace period) to see how it exits.
	cmd := exec.Command(exe, "serve", "--config", f.configPath, "--admin", f.adminAddr, "--watch", "0", "--log-level", "info")
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

// fdKinds sorts the proxy's file descriptors: sockets by what they connect
// (clients on a frontend port, backends on the backend port, the admin
// API, listeners) and everything else by kind. ports maps a local port to
// a name; backendPort is the lab's.
func (p *proxyProc) fdKinds(ports map[int]string, backendPort int) map[string]int {
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
		case port(s.remote) == backendPort:
			out["to backends"]++
		case ports[port(s.local)] != "":
			out[ports[port(s.local)]]++
		default:
			out["other TCP"]++
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
