//go:build linux

package park

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// pair returns both ends of a loopback TCP connection.
func pair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

func raw(t *testing.T, c *net.TCPConn) syscall.RawConn {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// woken parks c and returns where its wake reports.
func woken(t *testing.T, l *Lot, c *net.TCPConn, deadline time.Time) (*Spot, chan bool) {
	t.Helper()
	ch := make(chan bool, 2)
	sp := l.Park(raw(t, c), deadline, func(timedOut bool) { ch <- timedOut })
	if sp == nil {
		t.Fatal("Park refused a TCP socket")
	}
	return sp, ch
}

func expectWake(t *testing.T, ch chan bool, want bool, why string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("%s: woken with timedOut %v, want %v", why, got, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: not woken after 20 s", why)
	}
}

// A parked socket is woken once: when it has data, when its peer
// closes, at its deadline, or when the lot closes; never after Unpark.
func TestLotWakes(t *testing.T) {
	ticks := make(chan time.Time, 100)
	l, err := New(20*time.Millisecond, func(now time.Time) {
		select {
		case ticks <- now:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	dataC, dataS := pair(t)
	_, dataCh := woken(t, l, dataS, time.Time{})
	closeC, closeS := pair(t)
	_, closeCh := woken(t, l, closeS, time.Time{})
	_, lateS := pair(t)
	_, lateCh := woken(t, l, lateS, time.Now().Add(100*time.Millisecond))
	_, goneS := pair(t)
	goneSp, goneCh := woken(t, l, goneS, time.Time{})
	_, lastS := pair(t)
	_, lastCh := woken(t, l, lastS, time.Time{})
	if n := l.Parked(); n != 5 {
		t.Fatalf("%d parked, want 5", n)
	}

	dataC.Write([]byte("x"))
	expectWake(t, dataCh, false, "data")
	closeC.Close()
	expectWake(t, closeCh, false, "peer closed")
	expectWake(t, lateCh, true, "deadline")
	if !l.Unpark(goneSp) || l.Unpark(goneSp) {
		t.Fatal("Unpark: want true once, then false")
	}
	<-ticks
	l.Close()
	expectWake(t, lastCh, true, "lot closed")
	select {
	case v := <-goneCh:
		t.Fatalf("an unparked socket was woken (%v)", v)
	case v := <-dataCh:
		t.Fatalf("a socket was woken twice (%v)", v)
	default:
	}
	if l.Park(raw(t, goneS), time.Time{}, func(bool) {}) != nil {
		t.Fatal("a closed lot parked a socket")
	}
}

// Memory is released once a burst of at least releaseAfter parks has
// ended (a tick with no park), at most every releaseEvery.
func TestReleaseAfterABurst(t *testing.T) {
	t0 := time.Unix(1000, 0)
	l := &Lot{}
	steps := []struct {
		parks int
		at    time.Duration
		want  bool
	}{
		{parks: 1000, at: 0, want: false},               // parking goes on
		{parks: 0, at: time.Second, want: false},        // quiet, but under releaseAfter
		{parks: 100, at: 2 * time.Second, want: false},  // over it now, not quiet
		{parks: 0, at: 3 * time.Second, want: true},     // the burst ended
		{parks: 2000, at: 4 * time.Second, want: false}, // a new burst
		{parks: 0, at: 5 * time.Second, want: false},    // ended, but released 2 s ago
		{parks: 0, at: 33 * time.Second, want: true},    // 30 s later
		{parks: 0, at: 34 * time.Second, want: false},   // nothing parked since
	}
	for i, st := range steps {
		l.parks += st.parks
		if got := l.releaseDueLocked(t0.Add(st.at)); got != st.want {
			t.Fatalf("step %d (+%d parks at %v): release %v, want %v", i, st.parks, st.at, got, st.want)
		}
	}
}
