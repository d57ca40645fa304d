package netcut_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/netcut"
)

// A forwarded connection carries bytes both ways until Cut; after Cut it
// is closed and new connections are refused.
func TestForwarder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
			go func() {
				defer c.Close()
				s := bufio.NewScanner(c)
				for s.Scan() {
					c.Write([]byte("echo " + s.Text() + "\n"))
				}
			}()
		}
	}()
	f, err := netcut.Listen(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", f.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	c.Write([]byte("hi\n"))
	if line, err := r.ReadString('\n'); err != nil || line != "echo hi\n" {
		t.Fatalf("through the forwarder: %q, %v", line, err)
	}
	f.Cut()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("again\n"))
	if line, err := r.ReadString('\n'); err == nil {
		t.Fatalf("after Cut the connection still answers: %q", line)
	}
	if c2, err := net.DialTimeout("tcp", f.Addr(), time.Second); err == nil {
		c2.Close()
		t.Fatal("after Cut a new connection was accepted")
	}
	f.Cut() // idempotent
}
