package h1

import (
	"bufio"
	"errors"
	"strings"
	"testing"
)

func TestHeadLen(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"HTTP/1.1 200 OK\r\n\r\nbody", 19},
		{"HTTP/1.1 200 OK\r\nA: b\r\n\r\n\r\n\r\n", 25},
		{"HTTP/1.1 200 OK\nA: b\n\nx\r\n\r\n", 22}, // bare LF
		{"HTTP/1.1 200 OK\r\nA: b\n\r\nx", 24},     // LF, then an empty CRLF line
		{"HTTP/1.1 200 OK\r\nA: b\r\n", 0},         // incomplete
		{"HTTP/1.1 200 OK\r\nA: b\r\r\n\r\nx", 26}, // "\r\r\n" is not an empty line
	} {
		if got := headLen([]byte(tc.in), 0); got != tc.want {
			t.Errorf("headLen(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// awaitHead reads a head longer than the connection's buffer through a
// larger reader, and stops at the limit.
func TestAwaitHead(t *testing.T) {
	head := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: 0123456789\r\n", 2000) + "\r\n"
	br := bufio.NewReaderSize(strings.NewReader(head+"body"), 4096)
	r, n, err := awaitHead(br, 64<<10)
	if err != nil || n != len(head) || r == br {
		t.Fatalf("awaitHead = %v, %d, %v; want a larger reader, %d, nil", r == br, n, err, len(head))
	}
	br = bufio.NewReaderSize(strings.NewReader(head+"body"), 4096)
	if _, _, err := awaitHead(br, 16<<10); !errors.Is(err, errHeadTooLarge) || !IsBadResponse(err) {
		t.Errorf("over the limit: %v, want errHeadTooLarge", err)
	}
}
