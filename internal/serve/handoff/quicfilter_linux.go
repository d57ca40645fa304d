package handoff

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// QUIC long headers (RFC 9000 §17.2, RFC 9369 §3.2): the first byte has
// the form bit 0x80 and the type in 0x30 (Initial: 0 in version 1, 1 in
// version 2), then the version (4 bytes) and the Destination Connection
// ID's length. A client's first Initial carries a Destination Connection
// ID it chose, of at least 8 bytes (RFC 9000 §7.2); once it has the
// server's answer it uses the server's, which quic-go makes 4 bytes long
// (Spillway keeps quic-go's default).
const (
	quicV1 = 0x00000001
	quicV2 = 0x6b3343cf
	// udpHeader is where a UDP socket filter finds the payload.
	udpHeader = 8
)

// newQUICFilter is a socket filter that drops the datagrams that start a
// new QUIC connection (an Initial packet, version 1 or 2, whose
// Destination Connection ID is 8 bytes or more) and accepts every other.
func newQUICFilter() ([]bpf.RawInstruction, error) {
	const accept, drop = 0xffffffff, 0
	return bpf.Assemble([]bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: udpHeader, Size: 1},
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x80, SkipFalse: 11}, // a short header: accept
		/* 2 */ bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0x30},
		/* 3 */ bpf.TAX{}, // X: the type bits
		/* 4 */ bpf.LoadAbsolute{Off: udpHeader + 1, Size: 4}, // the version
		/* 5 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: quicV1, SkipFalse: 2},
		/* 6 */ bpf.TXA{},
		/* 7 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0x00, SkipTrue: 3, SkipFalse: 5}, // v1 Initial?
		/* 8 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: quicV2, SkipFalse: 4},
		/* 9 */ bpf.TXA{},
		/* 10 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0x10, SkipFalse: 2}, // v2 Initial?
		/* 11 */ bpf.LoadAbsolute{Off: udpHeader + 5, Size: 1}, // an Initial: DCID length
		/* 12 */ bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: 8, SkipTrue: 1},
		/* 13 */ bpf.RetConstant{Val: accept},
		/* 14 */ bpf.RetConstant{Val: drop},
	})
}

// RefuseNewQUIC makes the kernel drop, on c, every datagram that would
// start a new QUIC connection, until AcceptNewQUIC; the connections
// already established (or past their first packet) go on. It is the old
// process's first step of an HTTP/3 handover: new connections' clients
// retransmit their first packet until the new process reads the socket
// (the filter belongs to the socket, which both processes share, so the
// old one removes it before it releases the socket, and the new one
// again before it reads).
func RefuseNewQUIC(c *net.UDPConn) error {
	prog, err := newQUICFilter()
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(prog))
	for i, ins := range prog {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	return control(c, func(fd int) error {
		return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]})
	})
}

// AcceptNewQUIC removes RefuseNewQUIC's filter from c, if any.
func AcceptNewQUIC(c *net.UDPConn) error {
	return control(c, func(fd int) error {
		err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DETACH_FILTER, 0)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	})
}

// control runs f on c's descriptor.
func control(c *net.UDPConn, f func(fd int) error) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	if ferr != nil {
		return fmt.Errorf("handoff: QUIC socket filter: %w", ferr)
	}
	return nil
}
