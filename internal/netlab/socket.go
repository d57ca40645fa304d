//go:build linux

package netlab

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// In runs fn on an OS thread switched into namespace ns, and returns its
// error. Sockets fn creates belong to ns for their whole life, whatever
// thread uses them later; nothing else fn does should depend on the
// namespace (goroutines it starts run on other threads). Afterwards the
// thread is switched back; if that fails it stays locked to the
// goroutine, which exits, so no other goroutine ever runs in ns by
// accident.
func In(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			errc <- fmt.Errorf("netlab: this thread's namespace: %w", err)
			return
		}
		defer home.Close()
		if err := setns(filepath.Join("/run/netns", ns)); err != nil {
			errc <- fmt.Errorf("netlab: entering namespace %s: %w", ns, err)
			return
		}
		err = fn()
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// setns switches the calling thread into the namespace at path.
func setns(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
}

// Listen opens a listener on addr inside ns.
func Listen(ctx context.Context, ns, network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := In(ns, func() error {
		var lc net.ListenConfig
		var err error
		ln, err = lc.Listen(ctx, network, addr)
		return err
	})
	return ln, err
}

// Dialer dials from inside a namespace.
type Dialer struct {
	NS string
	// Dialer holds the options (Timeout, LocalAddr, KeepAlive, ...).
	net.Dialer
}

// DialContext connects to addr, a literal IP address and port, from
// inside d.NS. (A name would be resolved by goroutines on other threads,
// outside the namespace.)
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := In(d.NS, func() error {
		var err error
		c, err = d.Dialer.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
