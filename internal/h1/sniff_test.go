package h1

import (
	"slices"
	"strings"
	"testing"
)

// trickledHead is a response head of about 100 KiB with a Connection
// field at its end, as a hostile backend would trickle it.
var trickledHead = "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Fill: "+strings.Repeat("f", 90)+"\r\n", 1000) + "Connection: X-Internal, close\r\n\r\n"

// A head that arrives a byte at a time is captured whole, with its
// Connection values.
func TestSniffConnByteByByte(t *testing.T) {
	c := &sniffConn{}
	c.arm()
	for i := range len(trickledHead) {
		c.capture([]byte{trickledHead[i]})
	}
	if got := c.connection(); !slices.Equal(got, []string{"X-Internal, close"}) {
		t.Fatalf("connection %q", got)
	}
}

// The final head's HTTP/1.0-with-Transfer-Encoding flag, which the
// fallback refuses (http10TE), is kept; a 1xx head does not set it.
func TestSniffConnHTTP10TE(t *testing.T) {
	for head, want := range map[string]bool{
		"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n":                              true,
		"HTTP/1.0 200 OK\nContent-Length: 2\ntransfer-encoding:\n\n":                         true,
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n": true,
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n":                              false,
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n":                                       false,
		"HTTP/1.0 103 Early Hints\r\nTransfer-Encoding: x\r\n\r\nHTTP/1.0 200 OK\r\n\r\n":    false,
	} {
		c := &sniffConn{}
		c.arm()
		c.capture([]byte(head))
		if got := c.http10TE(); got != want {
			t.Errorf("%q: http10TE %v, want %v", head, got, want)
		}
	}
}

// BenchmarkSniffTrickle: the cost of capturing a head sent a byte at a
// time; the scan for the head's end must not start over at every byte.
func BenchmarkSniffTrickle(b *testing.B) {
	one := make([]byte, 1)
	for b.Loop() {
		c := &sniffConn{}
		c.arm()
		for i := range len(trickledHead) {
			one[0] = trickledHead[i]
			c.capture(one)
		}
	}
}
