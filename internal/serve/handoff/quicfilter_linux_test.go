package handoff

import (
	"bytes"
	"net"
	"testing"
	"time"
)

// The filter drops the datagrams that start a QUIC connection (version
// 1 or 2 Initial with a client-chosen Destination Connection ID of 8
// bytes or more) and passes everything else: Initials to a server's
// 4-byte connection ID, Handshake packets, short headers, other
// versions; AcceptNewQUIC removes it.
func TestQUICFilter(t *testing.T) {
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cl, err := net.DialUDP("udp", nil, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	long := func(first byte, version uint32, dcidLen int) []byte {
		b := []byte{first, byte(version >> 24), byte(version >> 16), byte(version >> 8), byte(version), byte(dcidLen)}
		b = append(b, bytes.Repeat([]byte{0xab}, dcidLen)...)
		return append(append(b, 0), make([]byte, 40)...) // SCID length 0, the rest
	}
	cases := []struct {
		name string
		pkt  []byte
		pass bool
	}{
		{"v1 Initial, client's 8-byte DCID", long(0xc0, quicV1, 8), false},
		{"v1 Initial, client's 20-byte DCID", long(0xc3, quicV1, 20), false},
		{"v1 Initial to the server's 4-byte ID", long(0xc0, quicV1, 4), true},
		{"v1 Handshake", long(0xe0, quicV1, 8), true},
		{"v1 0-RTT", long(0xd0, quicV1, 8), true},
		{"v2 Initial, 8-byte DCID", long(0xd0, quicV2, 8), false},
		{"v2 Handshake (type 3)", long(0xf0, quicV2, 8), true},
		{"unknown version", long(0xc0, 0x1a2a3a4a, 8), true},
		{"short header", append([]byte{0x40}, bytes.Repeat([]byte{1}, 40)...), true},
	}
	check := func(filtered bool) {
		t.Helper()
		for _, tc := range cases {
			want := tc.pass || !filtered
			if _, err := cl.Write(tc.pkt); err != nil {
				t.Fatal(err)
			}
			// A marker after each: the kernel keeps the order, so when
			// the marker comes first the packet was dropped.
			marker := []byte{0x41, 'm'}
			cl.Write(marker)
			buf := make([]byte, 1500)
			srv.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, _, err := srv.ReadFromUDP(buf)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			got := !bytes.Equal(buf[:n], marker)
			if got {
				srv.ReadFromUDP(buf) // the marker
			}
			if got != want {
				t.Errorf("filter %v, %s: passed %v, want %v", filtered, tc.name, got, want)
			}
		}
	}
	check(false)
	if err := RefuseNewQUIC(srv); err != nil {
		t.Fatal(err)
	}
	check(true)
	if err := AcceptNewQUIC(srv); err != nil {
		t.Fatal(err)
	}
	if err := AcceptNewQUIC(srv); err != nil {
		t.Fatalf("removing no filter: %v", err)
	}
	check(false)
}
