//go:build linux

package netlab

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Link is a point-to-point link with a fixed one-way delay: a TUN device
// in each of two namespaces, and two goroutines of the lab process that
// read each packet from one device and write it to the other once the
// delay has passed (in order: the delay is the same for every packet).
// Up to linkQueue packets can be in flight per direction; more are
// dropped, as a full router queue drops them.
type Link struct {
	delay time.Duration
	a, b  *os.File
	cut   atomic.Bool
	wg    sync.WaitGroup
}

const linkQueue = 8192

// DelayLink makes a delayed link between device ifA (address cidrA) in
// namespace a and ifB (cidrB) in b, both up. Close, or the Net's Close,
// removes it.
func (n *Net) DelayLink(ctx context.Context, a, ifA, cidrA, b, ifB, cidrB string, oneWay time.Duration) (*Link, error) {
	fa, err := openTUN(a, ifA)
	if err != nil {
		return nil, err
	}
	fb, err := openTUN(b, ifB)
	if err != nil {
		fa.Close()
		return nil, err
	}
	l := &Link{delay: oneWay, a: fa, b: fb}
	for _, s := range []struct{ ns, dev, cidr string }{{a, ifA, cidrA}, {b, ifB, cidrB}} {
		if err := n.Addr(ctx, s.ns, s.dev, s.cidr); err != nil {
			l.Close()
			return nil, err
		}
		if err := n.Link(ctx, s.ns, s.dev, true); err != nil {
			l.Close()
			return nil, err
		}
	}
	l.wg.Go(func() { l.pump(fa, fb) })
	l.wg.Go(func() { l.pump(fb, fa) })
	n.mu.Lock()
	n.links = append(n.links, l)
	n.mu.Unlock()
	return l, nil
}

// openTUN creates TUN device dev in namespace ns (the device lives as
// long as the returned file is open).
func openTUN(ns, dev string) (*os.File, error) {
	var f *os.File
	err := In(ns, func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("netlab: /dev/net/tun: %w", err)
		}
		ifr, err := unix.NewIfreq(dev)
		if err != nil {
			unix.Close(fd)
			return fmt.Errorf("netlab: TUN device %s: %w", dev, err)
		}
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("netlab: creating TUN device %s in %s: %w", dev, ns, err)
		}
		f = os.NewFile(uintptr(fd), "tun:"+dev)
		return nil
	})
	return f, err
}

type packet struct {
	b   []byte
	due time.Time
}

// pump carries packets from one device to the other, each after the
// link's delay.
func (l *Link) pump(from, to *os.File) {
	q := make(chan packet, linkQueue)
	var wg sync.WaitGroup
	wg.Go(func() {
		for p := range q {
			if d := time.Until(p.due); d > 0 {
				time.Sleep(d)
			}
			if l.cut.Load() {
				continue
			}
			_, _ = to.Write(p.b) // a device going down loses the packet, as a link would
		}
	})
	buf := make([]byte, 65536)
	for {
		n, err := from.Read(buf)
		if err != nil { // closed (Close), or the device is gone
			break
		}
		if l.cut.Load() {
			continue
		}
		select {
		case q <- packet{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(l.delay)}:
		default: // queue full: dropped
		}
	}
	close(q)
	wg.Wait()
}

// Cut drops every packet in both directions (true) or carries them again
// (false): a cable cut, which neither end's interface sees.
func (l *Link) Cut(cut bool) { l.cut.Store(cut) }

// Close removes both devices and waits for the pumps to stop.
func (l *Link) Close() {
	l.a.Close()
	l.b.Close()
	l.wg.Wait()
}
