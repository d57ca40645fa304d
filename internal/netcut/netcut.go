// Package netcut forwards TCP connections to one target until it is cut:
// a network partition between a process and a server, on loopback. The
// fleet lab and the fleet tests cut an instance off etcd with it, so the
// instance cannot revoke its leases and they expire as after a crash
// (closing the instance's etcd client would not do: Close ends its
// watches first, and a lease revoke can get out before the connection
// closes).
package netcut

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Forwarder accepts connections on a loopback port and forwards each to
// its target until Cut.
type Forwarder struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []net.Conn
	cut   bool
	wg    sync.WaitGroup
}

// Listen starts a Forwarder to target (host:port) on a free port of
// 127.0.0.1.
func Listen(target string) (*Forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Forwarder{ln: ln, target: target}
	f.wg.Go(f.accept)
	return f, nil
}

// Addr is the address to dial instead of the target.
func (f *Forwarder) Addr() string { return f.ln.Addr().String() }

func (f *Forwarder) accept() {
	for {
		in, err := f.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", f.target)
		if err != nil {
			in.Close()
			continue
		}
		if !f.track(in, out) {
			in.Close()
			out.Close()
			continue
		}
		f.wg.Go(func() { io.Copy(out, in); out.Close() })
		f.wg.Go(func() { io.Copy(in, out); in.Close() })
	}
}

// track records a forwarded pair; false once cut.
func (f *Forwarder) track(c ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut {
		return false
	}
	f.conns = append(f.conns, c...)
	return true
}

// Cut closes every forwarded connection and refuses new ones, and waits
// for the forwarding goroutines to end. It is idempotent.
func (f *Forwarder) Cut() {
	f.mu.Lock()
	f.cut = true
	err := f.ln.Close()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	if err == nil || errors.Is(err, net.ErrClosed) {
		f.wg.Wait()
	}
}
