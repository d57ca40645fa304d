// Package handoff passes listening sockets from a running spillway serve
// to its replacement, for binary upgrades without a refused connection
// (HAProxy's -x, Envoy's hot restart): the old process offers its
// sockets on a Unix socket (Offer); the new one connects, receives them
// as file descriptors (SCM_RIGHTS; Take), binds nothing it inherited,
// and once it serves says "ready"; the old one then stops accepting and
// finishes its requests in flight. The kernel's accept queue and a UDP
// socket's receive queue belong to the socket, which both processes hold
// during the overlap, so no connection or datagram finds the port
// closed.
//
// An HTTP/3 frontend's UDP socket is handed over too, but QUIC cannot
// share one between two processes (a datagram of one process's
// connection read by the other is lost to it), so the new process does
// not read it until the old one has released it: the old one sends
// GOAWAY on its QUIC connections, lets their requests in flight finish,
// closes them and says "released" (ListenQUIC, Handover.Ready, Offer).
//
// Sockets also takes systemd's socket activation (LISTEN_FDS).
package handoff

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxFiles bounds the descriptors one handoff carries.
const maxFiles = 256

// Sockets are inherited listening sockets (from an old process or
// systemd), taken by the listeners that want their address. A nil
// *Sockets inherits nothing: every Listen binds.
type Sockets struct {
	mu  sync.Mutex
	tcp []net.Listener
	udp []*net.UDPConn
	// released is closed when the process that handed the sockets over
	// no longer reads its QUIC sockets (Take; nil: never shared).
	released chan struct{}
}

// FromFiles wraps inherited descriptors: stream listeners and UDP
// sockets (others are closed). The files are closed; the Sockets hold
// duplicates.
func FromFiles(files []*os.File) *Sockets {
	s := &Sockets{}
	for _, f := range files {
		if ln, err := net.FileListener(f); err == nil {
			s.tcp = append(s.tcp, ln)
		} else if pc, err := net.FilePacketConn(f); err == nil {
			if u, ok := pc.(*net.UDPConn); ok {
				s.udp = append(s.udp, u)
			} else {
				pc.Close()
			}
		}
		f.Close()
	}
	return s
}

// FromEnv returns the sockets systemd passes (LISTEN_PID, LISTEN_FDS; the
// variables are then unset), or nil when there are none.
func FromEnv() *Sockets {
	pid, err1 := strconv.Atoi(os.Getenv("LISTEN_PID"))
	n, err2 := strconv.Atoi(os.Getenv("LISTEN_FDS"))
	if err1 != nil || err2 != nil || pid != os.Getpid() || n <= 0 || n > maxFiles {
		return nil
	}
	os.Unsetenv("LISTEN_PID")
	os.Unsetenv("LISTEN_FDS")
	os.Unsetenv("LISTEN_FDNAMES")
	var files []*os.File
	for fd := 3; fd < 3+n; fd++ {
		syscall.CloseOnExec(fd)
		files = append(files, os.NewFile(uintptr(fd), "LISTEN_FD_"+strconv.Itoa(fd)))
	}
	return FromFiles(files)
}

// Len returns how many inherited sockets are not yet taken.
func (s *Sockets) Len() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tcp) + len(s.udp)
}

// sameAddr reports whether the configured address want (host:port)
// names the bound address got: same port (not 0) and same IP, or both
// unspecified.
func sameAddr(want string, gotIP net.IP, gotPort int) bool {
	host, port, err := net.SplitHostPort(want)
	if err != nil {
		return false
	}
	p, err := strconv.Atoi(port)
	if err != nil || p == 0 || p != gotPort {
		return false
	}
	ip := net.ParseIP(host)
	if host == "" || ip != nil && ip.IsUnspecified() {
		return gotIP.IsUnspecified()
	}
	if ip == nil {
		ips, err := net.LookupIP(host)
		if err != nil || len(ips) == 0 {
			return false
		}
		ip = ips[0]
	}
	return ip.Equal(gotIP)
}

// ListenTCP returns the inherited stream listener bound to addr, or a
// new one.
func (s *Sockets) ListenTCP(addr string) (net.Listener, error) {
	if s != nil {
		s.mu.Lock()
		for i, ln := range s.tcp {
			if a, ok := ln.Addr().(*net.TCPAddr); ok && sameAddr(addr, a.IP, a.Port) {
				s.tcp = append(s.tcp[:i], s.tcp[i+1:]...)
				s.mu.Unlock()
				return ln, nil
			}
		}
		s.mu.Unlock()
	}
	return net.Listen("tcp", addr)
}

// ListenBoth returns the inherited UDP socket and stream listener bound
// to addr (a DNS frontend), binding what was not inherited with bind.
func (s *Sockets) ListenBoth(addr string, bind func(string) (*net.UDPConn, net.Listener, error)) (*net.UDPConn, net.Listener, error) {
	var pc *net.UDPConn
	if s != nil {
		s.mu.Lock()
		for i, u := range s.udp {
			if a, ok := u.LocalAddr().(*net.UDPAddr); ok && sameAddr(addr, a.IP, a.Port) {
				pc = u
				s.udp = append(s.udp[:i], s.udp[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
	}
	if pc == nil {
		return bind(addr)
	}
	ln, err := s.ListenTCP(addr)
	if err != nil {
		pc.Close()
		return nil, nil, err
	}
	return pc, ln, nil
}

// ListenQUIC returns the inherited UDP socket bound to addr, or a new
// one, for an HTTP/3 frontend, and a channel that is closed once the
// socket is this process's alone: for a socket handed over by a running
// process, when that process has finished its QUIC connections and
// released it (Handover.Ready waits for that), else at once. The caller
// reads the socket only then.
func (s *Sockets) ListenQUIC(addr string) (*net.UDPConn, <-chan struct{}, error) {
	if s != nil {
		s.mu.Lock()
		for i, u := range s.udp {
			if a, ok := u.LocalAddr().(*net.UDPAddr); ok && sameAddr(addr, a.IP, a.Port) {
				s.udp = append(s.udp[:i], s.udp[i+1:]...)
				released := s.released
				s.mu.Unlock()
				if released == nil {
					released = closedChan()
				}
				return u, released, nil
			}
		}
		s.mu.Unlock()
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, nil, err
	}
	u, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, nil, err
	}
	return u, closedChan(), nil
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// Close closes the sockets nobody took (a new config dropped their
// addresses).
func (s *Sockets) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ln := range s.tcp {
		ln.Close()
	}
	for _, u := range s.udp {
		u.Close()
	}
	s.tcp, s.udp = nil, nil
}

// header is the message that carries the descriptors.
type header struct {
	PID   int `json:"pid"`
	Files int `json:"files"`
}

// Handover is the new process's side of a taken handoff: Ready tells the
// old process to stop accepting and finish.
type Handover struct {
	conn *net.UnixConn
	// PID is the old process's.
	PID int
	// released is the Sockets' (closed once the old process released
	// its QUIC sockets).
	released chan struct{}
	once     sync.Once
}

// releaseWait bounds the wait for the old process to release its QUIC
// sockets: spillway serve gives its HTTP/3 requests in flight at most
// 3 s, after at most 1 s for the handshakes it had started.
const releaseWait = 15 * time.Second

// Ready tells the old process that this one serves on the sockets, then
// waits in the background for it to release its QUIC sockets ("released",
// or the connection closing: the old process exited), at most
// releaseWait, and lets this process's HTTP/3 frontends read them.
func (h *Handover) Ready() error {
	if h == nil {
		return nil
	}
	if _, err := h.conn.Write([]byte("ready\n")); err != nil {
		h.Abort()
		return err
	}
	go func() {
		h.conn.SetReadDeadline(time.Now().Add(releaseWait))
		bufio.NewReader(h.conn).ReadString('\n') // "released", EOF or the deadline: all mean go
		h.Abort()
	}()
	return nil
}

// Abort closes the connection (without Ready, the old process keeps
// serving) and lets the HTTP/3 frontends read their sockets.
func (h *Handover) Abort() {
	if h != nil {
		h.once.Do(func() {
			h.conn.Close()
			close(h.released)
		})
	}
}

// Take asks the process offering its sockets on path for them. With no
// process there (no file, or nobody listening) it returns nil, nil, nil:
// a first start.
func Take(ctx context.Context, path string) (*Sockets, *Handover, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("upgrade socket %s: %w", path, err)
	}
	uc := c.(*net.UnixConn)
	uc.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 4096)
	oob := make([]byte, syscall.CmsgSpace(maxFiles*4))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		uc.Close()
		return nil, nil, fmt.Errorf("upgrade socket %s: receive the sockets: %w", path, err)
	}
	uc.SetReadDeadline(time.Time{})
	var h header
	if err := json.Unmarshal(buf[:n], &h); err != nil {
		uc.Close()
		return nil, nil, fmt.Errorf("upgrade socket %s: not a spillway handoff: %w", path, err)
	}
	files, err := parseRights(oob[:oobn])
	if err != nil || len(files) != h.Files {
		uc.Close()
		return nil, nil, fmt.Errorf("upgrade socket %s: got %d of %d sockets: %v", path, len(files), h.Files, err)
	}
	s := FromFiles(files)
	s.released = make(chan struct{})
	return s, &Handover{conn: uc, PID: h.PID, released: s.released}, nil
}

// parseRights returns the descriptors of SCM_RIGHTS messages.
func parseRights(oob []byte) ([]*os.File, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	for i := range msgs {
		fds, err := syscall.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		for _, fd := range fds {
			syscall.CloseOnExec(fd)
			files = append(files, os.NewFile(uintptr(fd), "inherited"))
		}
	}
	return files, nil
}

// Offer serves the handoff on path until ctx ends or a new process has
// taken over: each connection gets the descriptors files returns; when
// one answers "ready", takeover runs and, once it returns (this process
// no longer reads its QUIC sockets), the new process is told "released"
// and Offer returns. A taker that goes away without "ready" changes
// nothing. A stale socket file at path is replaced.
func Offer(ctx context.Context, path string, files func() ([]*os.File, error), takeover func()) error {
	os.Remove(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("upgrade socket %s: %w (fix: give --upgrade-socket a path in a directory the process can write, e.g. /run/spillway/upgrade.sock)", path, err)
	}
	ln.SetUnlinkOnClose(false) // the new process replaces the file
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("upgrade socket %s: %w", path, err)
		}
		if handOver(c, files) {
			ln.Close()
			takeover()
			c.SetWriteDeadline(time.Now().Add(time.Second))
			c.Write([]byte("released\n"))
			c.Close()
			return nil
		}
		c.Close()
	}
}

// handOver sends the descriptors on c and reports whether the taker
// answered "ready".
func handOver(c *net.UnixConn, files func() ([]*os.File, error)) bool {
	fs, err := files()
	if err != nil {
		return false
	}
	defer func() {
		for _, f := range fs {
			f.Close()
		}
	}()
	fds := make([]int, len(fs))
	for i, f := range fs {
		fds[i] = int(f.Fd())
	}
	b, _ := json.Marshal(header{PID: os.Getpid(), Files: len(fds)})
	if _, _, err := c.WriteMsgUnix(b, syscall.UnixRights(fds...), nil); err != nil {
		return false
	}
	// The taker starts its server (compiles, binds, primes DNS) before
	// it answers: minutes at most.
	c.SetReadDeadline(time.Now().Add(10 * time.Minute))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.TrimSpace(line) == "ready"
}

// File returns a duplicate of a listener's or UDP socket's descriptor.
func File(x any) (*os.File, error) {
	if f, ok := x.(interface{ File() (*os.File, error) }); ok {
		return f.File()
	}
	return nil, fmt.Errorf("handoff: %T has no file descriptor", x)
}
