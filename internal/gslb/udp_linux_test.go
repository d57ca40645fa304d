//go:build linux

package gslb

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"testing"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// cmsg builds one control message of level and type around data.
func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

func pktinfo4(ifindex int32, spec, addr [4]byte) []byte {
	d := make([]byte, unix.SizeofInet4Pktinfo)
	binary.NativeEndian.PutUint32(d[0:4], uint32(ifindex))
	copy(d[4:8], spec[:])
	copy(d[8:12], addr[:])
	return cmsg(unix.IPPROTO_IP, unix.IP_PKTINFO, d)
}

func pktinfo6(addr [16]byte, ifindex uint32) []byte {
	d := make([]byte, unix.SizeofInet6Pktinfo)
	copy(d[:16], addr[:])
	binary.NativeEndian.PutUint32(d[16:20], ifindex)
	return cmsg(unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, d)
}

// FuzzReplyControl checks the raw UDP loop's hand-written control-message
// code against x/net's parsers (the trusted reference): for any bytes it
// does not panic, and when x/net parses them, the reply's source is the
// destination x/net reads (IPv6 preferred; IPv4 and v4-mapped ones as
// IP_PKTINFO; none for an unspecified or absent one).
func FuzzReplyControl(f *testing.F) {
	f.Add(pktinfo4(1, [4]byte{}, [4]byte{127, 0, 0, 5}))
	f.Add(pktinfo6(netip.MustParseAddr("::1").As16(), 1))
	f.Add(pktinfo6(netip.MustParseAddr("::ffff:127.0.0.9").As16(), 1))
	f.Add(append(pktinfo4(1, [4]byte{}, [4]byte{127, 0, 0, 5}), pktinfo6(netip.MustParseAddr("fe80::1").As16(), 2)...))
	f.Add(append(pktinfo4(1, [4]byte{}, [4]byte{127, 0, 0, 5}), pktinfo4(1, [4]byte{}, [4]byte{127, 0, 0, 6})...))
	f.Add(pktinfo4(1, [4]byte{}, [4]byte{}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		buf := make([]byte, rawOOBLen)
		out := replyControl(in, buf)

		var c4 ipv4.ControlMessage
		var c6 ipv6.ControlMessage
		if c4.Parse(in) != nil || c6.Parse(in) != nil {
			return // malformed for the reference: only "no panic" holds
		}
		var want netip.Addr
		if a, ok := netip.AddrFromSlice(c6.Dst); ok && c6.Dst != nil {
			want = a
		} else if a, ok := netip.AddrFromSlice(c4.Dst.To4()); ok && c4.Dst != nil {
			want = a
		}
		if !want.IsValid() || want.IsUnspecified() {
			if len(out) != 0 {
				t.Fatalf("x/net reads no usable destination (%v / %v), reply control %x", c4.Dst, c6.Dst, out)
			}
			return
		}
		var r4 ipv4.ControlMessage
		var r6 ipv6.ControlMessage
		if err := r4.Parse(out); err != nil {
			t.Fatalf("reply control %x does not parse: %v", out, err)
		}
		if err := r6.Parse(out); err != nil {
			t.Fatalf("reply control %x does not parse: %v", out, err)
		}
		var got netip.Addr
		if want.Is4() || want.Is4In6() {
			// IP_PKTINFO's ipi_spec_dst (the source to send from), which
			// x/net's receive-side parser does not read.
			if len(out) < unix.CmsgLen(unix.SizeofInet4Pktinfo) {
				t.Fatalf("reply control %x: no IP_PKTINFO for %v", out, want)
			}
			got = netip.AddrFrom4([4]byte(out[unix.CmsgLen(0)+4 : unix.CmsgLen(0)+8]))
			want = want.Unmap()
		} else {
			got, _ = netip.AddrFromSlice(r6.Dst)
		}
		if got != want.WithZone("") {
			t.Fatalf("reply from %v, x/net reads the destination %v (in %x)", got, want, in)
		}
	})
}

// FuzzSockaddr: sockaddrAddrPort decodes what the kernel writes for any
// IPv4 or IPv6 address and port (encoded here as struct sockaddr_in and
// sockaddr_in6), and never panics on other bytes.
func FuzzSockaddr(f *testing.F) {
	f.Add([]byte{127, 0, 0, 1}, uint16(53), uint32(0), []byte{1, 2})
	f.Add(netip.MustParseAddr("fe80::1").AsSlice(), uint16(5353), uint32(3), []byte{})
	f.Fuzz(func(t *testing.T, ip []byte, port uint16, scope uint32, junk []byte) {
		_ = sockaddrAddrPort(junk)
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			return
		}
		var sa []byte
		if a.Is4() {
			var r unix.RawSockaddrInet4
			r.Family = unix.AF_INET
			binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&r.Port))[:], port)
			r.Addr = a.As4()
			sa = unsafe.Slice((*byte)(unsafe.Pointer(&r)), unix.SizeofSockaddrInet4)
		} else {
			var r unix.RawSockaddrInet6
			r.Family = unix.AF_INET6
			binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&r.Port))[:], port)
			r.Addr = a.As16()
			r.Scope_id = scope
			sa = unsafe.Slice((*byte)(unsafe.Pointer(&r)), unix.SizeofSockaddrInet6)
		}
		got := sockaddrAddrPort(sa)
		want := netip.AddrPortFrom(a, port)
		if a.Is6() && scope != 0 && a.IsLinkLocalUnicast() {
			// The zone of a link-local address is its scope ID.
			want = netip.AddrPortFrom(a.WithZone(strconv.FormatUint(uint64(scope), 10)), port)
		}
		if got != want {
			t.Fatalf("sockaddr %x: decoded %v, want %v", sa, got, want)
		}
	})
}
