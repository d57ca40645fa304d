//go:build linux

// Package netlab builds labs out of Linux network namespaces: namespaces
// named with a prefix, veth pairs and bridges between them, addresses,
// routes, delayed links, processes run inside a namespace (`ip netns
// exec`), and sockets the calling process opens inside one (a thread
// switched into the namespace creates the socket, which stays there).
//
// Namespaces, veths, addresses and routes are made with iproute2's `ip`,
// run as a child process. A delayed link (DelayLink) is a pair of TUN
// devices, one in each namespace, whose packets the lab process carries
// across after a fixed one-way delay: tc netem would do it in the kernel,
// but kernels built without CONFIG_NET_SCH_NETEM (Firecracker guests,
// some CI machines) have no netem, and the delay line works on any
// kernel with TUN. A Net removes what it made on Close: it stops its processes
// (SIGTERM, then SIGKILL), deletes its namespaces (which deletes their
// veths and routes) and its temporary directory. New first removes the
// leftovers of an earlier run that could not clean up (a crash, SIGKILL):
// namespaces whose names start with the prefix, and the processes still
// inside them. A lock file keeps two labs with the same prefix from
// running at once, so that clean-up never removes a live lab's
// namespaces.
//
// Only root (CAP_NET_ADMIN and CAP_SYS_ADMIN) can do any of this; Check
// says in one line what is missing.
package netlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNotPermitted is returned by Check (and New) when this process may
// not create network namespaces.
var ErrNotPermitted = errors.New("needs CAP_NET_ADMIN (run as root): it creates network namespaces")

// Check reports, in one line, why this process cannot build a lab: not
// Linux's iproute2, or no CAP_NET_ADMIN/CAP_SYS_ADMIN. nil when it can.
func Check() error {
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("netlab: iproute2's ip not found (apt-get install -y iproute2): %w", err)
	}
	var hdr unix.CapUserHeader
	var data [2]unix.CapUserData
	hdr.Version = unix.LINUX_CAPABILITY_VERSION_3
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("netlab: reading capabilities: %w", err)
	}
	for _, c := range []uint{unix.CAP_NET_ADMIN, unix.CAP_SYS_ADMIN} {
		if data[c/32].Effective&(1<<(c%32)) == 0 {
			return ErrNotPermitted
		}
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return fmt.Errorf("netlab: this kernel has no network namespaces: %w", err)
	}
	return nil
}

// Net is one lab's namespaces, processes and files.
type Net struct {
	prefix string
	dir    string
	lock   *os.File

	mu    sync.Mutex
	ns    []string
	procs []*Proc
	links []*Link
}

// New checks permissions, takes the prefix's lock, removes leftovers of
// an earlier run with the same prefix, and makes a temporary directory
// (Dir) for configs, sockets and logs. Close undoes all of it.
func New(ctx context.Context, prefix string) (*Net, error) {
	if err := Check(); err != nil {
		return nil, err
	}
	if prefix == "" || strings.ContainsAny(prefix, "/ ") {
		return nil, fmt.Errorf("netlab: prefix %q: use a short name without spaces or slashes", prefix)
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), prefix+"netlab.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("netlab: lock file: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("netlab: another lab with prefix %q is running (lock %s): %w", prefix, lock.Name(), err)
	}
	n := &Net{prefix: prefix, lock: lock}
	if err := Cleanup(ctx, prefix); err != nil {
		n.Close()
		return nil, err
	}
	if n.dir, err = os.MkdirTemp("", prefix+"lab-"); err != nil {
		n.Close()
		return nil, fmt.Errorf("netlab: %w", err)
	}
	return n, nil
}

// Dir is the lab's temporary directory, removed by Close.
func (n *Net) Dir() string { return n.dir }

// Cleanup removes the namespaces whose names start with prefix (killing
// the processes inside them first) and the temporary directories an
// earlier lab with the prefix left behind. The caller must hold the
// prefix's lock (New does).
func Cleanup(ctx context.Context, prefix string) error {
	names, err := Namespaces(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range names {
		if strings.HasPrefix(ns, prefix) {
			errs = append(errs, deleteNS(ctx, ns))
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"lab-*"))
	for _, d := range dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	return errors.Join(errs...)
}

// Namespaces lists the named network namespaces (`ip netns list`).
func Namespaces(ctx context.Context) ([]string, error) {
	out, err := run(ctx, "ip", "netns", "list")
	if err != nil {
		return nil, err
	}
	var names []string
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// deleteNS kills the processes inside ns and deletes it.
func deleteNS(ctx context.Context, ns string) error {
	out, _ := run(ctx, "ip", "netns", "pids", ns)
	for f := range strings.FieldsSeq(out) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_, err := run(ctx, "ip", "netns", "del", ns)
	return err
}

// AddNS creates the namespace prefix+name with its loopback up and
// returns its full name.
func (n *Net) AddNS(ctx context.Context, name string) (string, error) {
	ns := n.prefix + name
	if _, err := run(ctx, "ip", "netns", "add", ns); err != nil {
		return "", err
	}
	n.mu.Lock()
	n.ns = append(n.ns, ns)
	n.mu.Unlock()
	if _, err := run(ctx, "ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
		return "", err
	}
	return ns, nil
}

// Veth links namespace a's interface ifA with namespace b's ifB (both
// up).
func (n *Net) Veth(ctx context.Context, a, ifA, b, ifB string) error {
	if _, err := run(ctx, "ip", "link", "add", ifA, "netns", a, "type", "veth", "peer", "name", ifB, "netns", b); err != nil {
		return err
	}
	if err := n.Link(ctx, a, ifA, true); err != nil {
		return err
	}
	return n.Link(ctx, b, ifB, true)
}

// Bridge creates bridge dev in ns, up.
func (n *Net) Bridge(ctx context.Context, ns, dev string) error {
	if _, err := n.IP(ctx, ns, "link", "add", dev, "type", "bridge"); err != nil {
		return err
	}
	return n.Link(ctx, ns, dev, true)
}

// Attach makes dev a port of bridge br (both in ns).
func (n *Net) Attach(ctx context.Context, ns, dev, br string) error {
	_, err := n.IP(ctx, ns, "link", "set", dev, "master", br)
	return err
}

// Link sets dev in ns up or down.
func (n *Net) Link(ctx context.Context, ns, dev string, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	_, err := n.IP(ctx, ns, "link", "set", dev, state)
	return err
}

// Addr adds an address (CIDR) to dev in ns. An IPv6 address skips
// duplicate address detection (nodad), so it is usable at once.
func (n *Net) Addr(ctx context.Context, ns, dev, cidr string) error {
	args := []string{"addr", "add", cidr, "dev", dev}
	if strings.Contains(cidr, ":") {
		args = append(args, "nodad")
	}
	_, err := n.IP(ctx, ns, args...)
	return err
}

// IP runs `ip -n ns ARGS...` and returns its output.
func (n *Net) IP(ctx context.Context, ns string, args ...string) (string, error) {
	return run(ctx, "ip", append([]string{"-n", ns}, args...)...)
}

// Sysctl sets a sysctl inside ns (e.g. net.ipv4.ip_forward=1).
func (n *Net) Sysctl(ctx context.Context, ns, key, value string) error {
	_, err := run(ctx, "ip", "netns", "exec", ns, "sysctl", "-q", "-w", key+"="+value)
	return err
}

// Close stops every process the Net started, deletes its namespaces and
// its directory, and releases the lock. It returns the first errors met
// but always does all of it.
func (n *Net) Close() error {
	n.mu.Lock()
	procs, names, links := n.procs, n.ns, n.links
	n.procs, n.ns, n.links = nil, nil, nil
	n.mu.Unlock()
	var errs []error
	for _, p := range procs {
		p.Stop(2 * time.Second)
	}
	for _, l := range links {
		l.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ns := range names {
		errs = append(errs, deleteNS(ctx, ns))
	}
	if n.dir != "" {
		errs = append(errs, os.RemoveAll(n.dir))
	}
	if n.lock != nil {
		n.lock.Close()
	}
	return errors.Join(errs...)
}

// run runs a command and returns its standard output; the error holds
// the command line and its standard error.
func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("netlab: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
