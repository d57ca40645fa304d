//go:build linux

package gslb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/spillwaylb/spillway/internal/procs"
)

// Raw UDP serving (Linux). Through Go's network poller every query costs
// a non-blocking read that usually finds nothing, a park, an epoll wake-up
// and a reschedule of the worker; on loopback under load that was most of
// the CPU that is not the kernel's own work (docs/performance.md, issue
// 13). Here, as in gdnsd, the socket is taken out of the poller and a few
// goroutines block in recvmmsg on it, each on a thread of its own while it
// waits: the kernel wakes one per arrival and hands it every datagram
// queued by then (up to udpBatch), and the replies of a batch leave in one
// sendmmsg. Each call is first tried without blocking and without telling
// the scheduler (RawSyscall, MSG_DONTWAIT); only an empty queue blocks.
//
// The runtime's side of blocking: a P whose goroutine sits in a system
// call with an empty run queue is taken back by sysmon only after a
// while, and sysmon itself sleeps up to 10 ms when the process is idle.
// With GOMAXPROCS 1 (--procs auto at low load) a goroutine blocked in
// recvmmsg would hold the only P and every other goroutine, HTTP
// included, would wait for that (a 1 ms sleep overshot by up to 4.1 ms
// in a test, against 0.4 ms with the reserve). So each serving goroutine
// gets a P of its own on top of GOMAXPROCS (procs.Reserve) while it
// serves, and yields every udpYield (a goroutine not rescheduled for
// 10 ms is preempted).
const (
	// udpBatch is the most datagrams one recvmmsg takes.
	udpBatch = 16
	// udpYield is how often a serving goroutine yields (runtime.Gosched).
	udpYield = 5 * time.Millisecond
)

// udpThreads is how many goroutines serve each UDP socket: half the CPUs
// (the kernel's share of a reply is most of its cost, and it is spent on
// the sending thread), at least one.
func udpThreads() int { return max(1, runtime.NumCPU()/2) }

// rawWake is how often a thread blocked in recvmmsg wakes to look for the
// stop (SO_RCVTIMEO); shutdown(SHUT_RD) normally wakes it at once.
const rawWake = 250 * time.Millisecond

// serveUDPRaw serves pc with raw system calls until stop is closed. It
// reports false, having changed nothing, when the socket cannot be taken
// over (the caller then serves pc through the poller); otherwise it
// closes pc (the socket lives on in a duplicate descriptor, out of the
// poller) and returns once the threads have stopped and the socket is
// closed.
func (f *Front) serveUDPRaw(pc *net.UDPConn, pktinfo bool, stop <-chan struct{}) (bool, error) {
	fd, err := takeUDP(pc)
	if err != nil {
		f.log.Warn("gslb: udp: serving through the Go poller", "address", pc.LocalAddr().String(), "err", err)
		return false, nil
	}
	f.rawFD.Store(pc, fd)
	defer f.rawFD.Delete(pc)
	errs := make([]error, udpThreads())
	defer procs.Reserve(len(errs))()
	var stopped atomic.Bool
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = f.rawWorker(fd, pktinfo, &stopped) })
	}
	// The threads return only once stopped is set, so fd is closed after
	// this goroutine is done with it.
	woken := make(chan struct{})
	go func() {
		<-stop
		stopped.Store(true)
		// Wakes every thread blocked in recvmmsg (ENOTCONN on an
		// unconnected socket, but the shutdown is done).
		if !f.shared.Load() {
			// Wakes the threads now; a socket handed to another
			// process is left alone (shutdown acts on the socket in
			// every process), its threads wake within rawWake.
			_ = unix.Shutdown(fd, unix.SHUT_RD)
		}
		close(woken)
	}()
	wg.Wait()
	<-woken
	err = errors.Join(errs...)
	if cerr := unix.Close(fd); err == nil && cerr != nil {
		err = fmt.Errorf("close udp socket: %w", cerr)
	}
	return true, err
}

// takeUDP returns a blocking duplicate of pc's descriptor with receive
// and send timeouts, and closes pc, which removes the socket from Go's
// poller.
// dupFile returns a duplicate of descriptor fd as a file.
func dupFile(fd int) (*os.File, error) {
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup udp socket: %w", err)
	}
	return os.NewFile(uintptr(nfd), "udp"), nil
}

func takeUDP(pc *net.UDPConn) (int, error) {
	rc, err := pc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var dupErr error
	if err := rc.Control(func(s uintptr) {
		fd, dupErr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, err
	}
	if dupErr != nil {
		return -1, fmt.Errorf("dup: %w", dupErr)
	}
	tv := unix.NsecToTimeval(rawWake.Nanoseconds())
	if err := errors.Join(
		unix.SetNonblock(fd, false),
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv),
		// A send that cannot go out within it is dropped (the reply is
		// the client's loss), so a full send buffer cannot hold a thread.
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv),
	); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	_ = pc.Close()
	return fd, nil
}

// sockaddrLen is room for a struct sockaddr_in6 (and so sockaddr_in).
const sockaddrLen = unix.SizeofSockaddrInet6

// rawBatch is one thread's buffers: udpBatch received datagrams with their
// source addresses and control messages, and the replies to send.
type rawBatch struct {
	recv  []unix.Mmsghdr
	riov  []unix.Iovec
	in    [][]byte
	names [][sockaddrLen]byte
	oob   [][]byte // received control messages (pktinfo)
	send  []unix.Mmsghdr
	siov  []unix.Iovec
	out   [][]byte // reply buffers, one per received datagram
	soob  [][]byte // reply control messages (pktinfo)
	msg   dns.Msg  // the reply being built
}

// Control message room: an IP_PKTINFO and an IPV6_PKTINFO (a dual-stack
// socket gets both for an IPv4 query).
var rawOOBLen = unix.CmsgSpace(unix.SizeofInet4Pktinfo) + unix.CmsgSpace(unix.SizeofInet6Pktinfo)

func newRawBatch(n int, pktinfo bool) *rawBatch {
	b := &rawBatch{
		recv: make([]unix.Mmsghdr, n), riov: make([]unix.Iovec, n),
		in: make([][]byte, n), names: make([][sockaddrLen]byte, n), oob: make([][]byte, n),
		send: make([]unix.Mmsghdr, n), siov: make([]unix.Iovec, n),
		out: make([][]byte, n), soob: make([][]byte, n),
	}
	for i := range n {
		b.in[i] = make([]byte, dns.MaxMsgSize)
		b.out[i] = make([]byte, 0, 1024)
		b.riov[i].Base = &b.in[i][0]
		b.riov[i].SetLen(len(b.in[i]))
		h := &b.recv[i].Hdr
		h.Name = &b.names[i][0]
		h.Iov = &b.riov[i]
		h.SetIovlen(1)
		if pktinfo {
			b.oob[i] = make([]byte, rawOOBLen)
			b.soob[i] = make([]byte, rawOOBLen)
			h.Control = &b.oob[i][0]
		}
	}
	return b
}

// rawWorker is one serving goroutine's receive-answer-send loop on fd.
func (f *Front) rawWorker(fd int, pktinfo bool, stopped *atomic.Bool) error {
	b := newRawBatch(udpBatch, pktinfo)
	yielded := time.Now()
	for !stopped.Load() {
		// A goroutine that is never rescheduled looks stuck to the
		// runtime: after 10 ms it is preempted, and its P taken away if
		// it is in a system call, which also keeps sysmon waking every
		// 20 µs for a while. Yielding every few milliseconds costs less.
		if time.Since(yielded) > udpYield {
			runtime.Gosched()
			yielded = time.Now()
		}
		for i := range b.recv {
			h := &b.recv[i].Hdr
			h.Namelen = sockaddrLen
			h.Flags = 0
			if pktinfo {
				h.SetControllen(rawOOBLen)
			}
		}
		n, err := rawMmsg(unix.SYS_RECVMMSG, fd, b.recv, unix.MSG_DONTWAIT)
		if err == unix.EAGAIN {
			n, err = mmsg(unix.SYS_RECVMMSG, fd, b.recv, unix.MSG_WAITFORONE)
		}
		if err != nil {
			switch err {
			case unix.EAGAIN, unix.EINTR:
			default:
				if stopped.Load() {
					return nil
				}
				// Keep serving (a DNS server should not stop over one bad
				// read), but do not spin on a lasting error.
				f.log.Warn("gslb: udp read failed; retrying", "err", err)
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		m := 0
		for i := range n {
			r := &b.recv[i]
			from := sockaddrAddrPort(b.names[i][:min(int(r.Hdr.Namelen), sockaddrLen)])
			if !from.IsValid() {
				continue
			}
			var reply []byte
			reply, b.out[i] = f.answer(b.in[i][:r.Len], from, b.out[i], &b.msg)
			if len(reply) == 0 {
				continue
			}
			s := &b.send[m].Hdr
			*s = unix.Msghdr{Name: &b.names[i][0], Namelen: r.Hdr.Namelen, Iov: &b.siov[m]}
			s.SetIovlen(1)
			b.siov[m].Base = &reply[0]
			b.siov[m].SetLen(len(reply))
			if pktinfo {
				if c := replyControl(b.oob[i][:r.Hdr.Controllen], b.soob[m]); len(c) > 0 {
					s.Control = &c[0]
					s.SetControllen(len(c))
				}
			}
			m++
		}
		// A failed send is that client's loss: skip it, send the rest.
		for sent := 0; sent < m; {
			k, err := rawMmsg(unix.SYS_SENDMMSG, fd, b.send[sent:m], unix.MSG_DONTWAIT)
			if err == unix.EAGAIN {
				k, err = mmsg(unix.SYS_SENDMMSG, fd, b.send[sent:m], 0)
			}
			switch err {
			case nil:
				sent += k
			case unix.EINTR:
			default:
				sent++
			}
		}
	}
	return nil
}

// mmsg calls recvmmsg or sendmmsg (trap) on hs with flags.
func mmsg(trap uintptr, fd int, hs []unix.Mmsghdr, flags int) (int, error) {
	n, _, errno := unix.Syscall6(trap, uintptr(fd), uintptr(unsafe.Pointer(&hs[0])), uintptr(len(hs)), uintptr(flags), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// rawMmsg is mmsg for calls that do not block (MSG_DONTWAIT): the thread
// keeps its P, as the runtime does not hear of the call.
func rawMmsg(trap uintptr, fd int, hs []unix.Mmsghdr, flags int) (int, error) {
	n, _, errno := unix.RawSyscall6(trap, uintptr(fd), uintptr(unsafe.Pointer(&hs[0])), uintptr(len(hs)), uintptr(flags), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// sockaddrAddrPort decodes a struct sockaddr_in or sockaddr_in6 (the
// zero AddrPort for anything else).
func sockaddrAddrPort(sa []byte) netip.AddrPort {
	if len(sa) < 2 {
		return netip.AddrPort{}
	}
	port := func() uint16 { return binary.BigEndian.Uint16(sa[2:4]) }
	switch *(*uint16)(unsafe.Pointer(&sa[0])) {
	case unix.AF_INET:
		if len(sa) >= unix.SizeofSockaddrInet4 {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte(sa[4:8])), port())
		}
	case unix.AF_INET6:
		if len(sa) >= unix.SizeofSockaddrInet6 {
			a := netip.AddrFrom16([16]byte(sa[8:24]))
			if id := *(*uint32)(unsafe.Pointer(&sa[24])); id != 0 && a.IsLinkLocalUnicast() {
				a = a.WithZone(strconv.FormatUint(uint64(id), 10))
			}
			return netip.AddrPortFrom(a, port())
		}
	}
	return netip.AddrPort{}
}

// replyControl writes into buf the control message that sends a reply
// from the destination address in a received packet's control messages,
// and returns it (empty when they name none: the kernel then picks the
// source). As replySource: the IPv6 destination is preferred, and an
// IPv4 one (also v4-mapped, on a dual-stack socket) gets an IP_PKTINFO.
func replyControl(in, buf []byte) []byte {
	// The last of each kind counts, as in x/net's parsers (the kernel
	// sends at most one of each).
	var dst4, dst6 netip.Addr
	for len(in) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&in[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(in) {
			break
		}
		data := in[unix.CmsgLen(0):l]
		switch {
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			dst6 = netip.AddrFrom16([16]byte(data[:16]))
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			dst4 = netip.AddrFrom4([4]byte(data[8:12])) // ipi_addr
		}
		in = in[min(cmsgAlign(l), len(in)):]
	}
	dst := dst6
	if !dst.IsValid() {
		dst = dst4
	}
	if !dst.IsValid() || dst.IsUnspecified() {
		return nil
	}
	clear(buf)
	h := (*unix.Cmsghdr)(unsafe.Pointer(&buf[0]))
	data := buf[unix.CmsgLen(0):]
	if dst.Is4() || dst.Is4In6() {
		h.Level, h.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
		h.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
		a := dst.Unmap().As4()
		copy(data[4:8], a[:]) // ipi_spec_dst: the source to use
		return buf[:unix.CmsgSpace(unix.SizeofInet4Pktinfo)]
	}
	h.Level, h.Type = unix.IPPROTO_IPV6, unix.IPV6_PKTINFO
	h.SetLen(unix.CmsgLen(unix.SizeofInet6Pktinfo))
	a := dst.As16()
	copy(data[:16], a[:])
	return buf[:unix.CmsgSpace(unix.SizeofInet6Pktinfo)]
}

// cmsgAlign rounds l up to the alignment of control messages.
func cmsgAlign(l int) int { return unix.CmsgSpace(l) - unix.CmsgSpace(0) }
