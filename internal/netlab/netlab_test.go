//go:build linux

package netlab_test

import (
	"context"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/netlab"
)

// need skips the test without the rights to build namespaces, unless
// SPILLWAY_REQUIRE_NETNS is set (CI runs as root and sets it).
func need(t *testing.T) {
	t.Helper()
	if err := netlab.Check(); err != nil {
		if os.Getenv("SPILLWAY_REQUIRE_NETNS") != "" {
			t.Fatalf("SPILLWAY_REQUIRE_NETNS is set: %v", err)
		}
		t.Skip(err)
	}
}

const prefix = "spwt-"

// Two namespaces joined by a delayed link: a TCP handshake from one to
// the other takes the two one-way delays; a cut link carries nothing;
// Close removes the namespaces and the process started inside one.
func TestDelayLinkAndClose(t *testing.T) {
	need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := netlab.New(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	a, err := n.AddNS(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.AddNS(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	link, err := n.DelayLink(ctx, a, "wan0", "192.0.2.1/30", b, "wan0", "192.0.2.2/30", 15*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}

	ln, err := netlab.Listen(ctx, b, "tcp", "192.0.2.2:7000")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "hi")
			c.Close()
		}
	}()
	// The address exists only in b: the root namespace cannot reach it.
	if c, err := net.DialTimeout("tcp", "192.0.2.2:7000", 300*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("192.0.2.2:7000 reachable from the root namespace")
	}
	d := &netlab.Dialer{NS: a}
	d.Timeout = 5 * time.Second
	start := time.Now()
	c, err := d.DialContext(ctx, "tcp", "192.0.2.2:7000")
	if err != nil {
		t.Fatal(err)
	}
	rtt := time.Since(start)
	body, _ := io.ReadAll(c)
	c.Close()
	if string(body) != "hi" {
		t.Fatalf("read %q", body)
	}
	if rtt < 30*time.Millisecond {
		t.Fatalf("handshake took %s, want at least the link's 2 × 15ms", rtt)
	}
	link.Cut(true)
	d.Timeout = 300 * time.Millisecond
	if c, err := d.DialContext(ctx, "tcp", "192.0.2.2:7000"); err == nil {
		c.Close()
		t.Fatal("dialled across a cut link")
	}
	link.Cut(false)
	d.Timeout = 5 * time.Second
	if c, err := d.DialContext(ctx, "tcp", "192.0.2.2:7000"); err != nil {
		t.Fatalf("after the cut is mended: %v", err)
	} else {
		c.Close()
	}

	p, err := n.Start(b, "sleeper", []string{"sleep", "300"})
	if err != nil {
		t.Fatal(err)
	}
	must(t, n.Close())
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the process inside the namespace survived Close")
	}
	left, err := netlab.Namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range left {
		if strings.HasPrefix(ns, prefix) {
			t.Fatalf("namespace %s left after Close", ns)
		}
	}
}

// A namespace left by a crashed run (made here by hand, with a process
// inside) is removed by the next New.
func TestLeftoversRemoved(t *testing.T) {
	need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := netlab.New(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := n.AddNS(ctx, "crashed")
	if err != nil {
		t.Fatal(err)
	}
	p, err := n.Start(ns, "sleeper", []string{"sleep", "300"})
	if err != nil {
		t.Fatal(err)
	}
	// Forget both, as a crash would: only release the lock.
	n.Forget()
	n2, err := netlab.New(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	left, err := netlab.Namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(left, ns) {
		t.Fatalf("leftover %s not removed", ns)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the leftover's process survived")
	}
}

// A second lab with the same prefix is refused while the first runs.
func TestLock(t *testing.T) {
	need(t)
	ctx := context.Background()
	n, err := netlab.New(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n2, err := netlab.New(ctx, prefix); err == nil {
		n2.Close()
		t.Fatal("a second lab with the same prefix started")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
