package proxy

import "testing"

func TestParseTraceparent(t *testing.T) {
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, c := range []struct {
		v       string
		ok      bool
		sampled bool
	}{
		{"00-" + id + "-00f067aa0ba902b7-01", true, true},
		{"00-" + id + "-00f067aa0ba902b7-00", true, false},
		{"01-" + id + "-00f067aa0ba902b7-01-future", true, true},  // later versions may add fields
		{"00-" + id + "-00f067aa0ba902b7-01-extra", false, false}, // version 00 has none
		{"ff-" + id + "-00f067aa0ba902b7-01", false, false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false, false},
		{"00-" + id + "-0000000000000000-01", false, false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false, false}, // upper case
		{"00-" + id + "-00f067aa0ba902b7-0g", false, false},
		{"00-" + id + "_00f067aa0ba902b7-01", false, false},
		{"", false, false},
	} {
		var tc TraceContext
		ok := parseTraceparent(c.v, &tc)
		if ok != c.ok || ok && (string(tc.ID[:]) != id || tc.Span != 0x00f067aa0ba902b7 || tc.Sampled != c.sampled) {
			t.Errorf("%q: ok %v %+v, want ok %v", c.v, ok, tc, c.ok)
		}
	}
}

func TestParseCloudTrace(t *testing.T) {
	const id = "105445aa7843bc8bf206b12000100000"
	for _, c := range []struct {
		v       string
		ok      bool
		span    uint64
		sampled bool
	}{
		{id + "/1;o=1", true, 1, true},
		{id + "/18446744073709551615;o=0", true, 1<<64 - 1, false},
		{id, true, 0, false},
		{"105445AA7843BC8BF206B12000100000/7", true, 7, false},
		{id + "/18446744073709551616", false, 0, false}, // span overflows
		{"00000000000000000000000000000000/1;o=1", false, 0, false},
		{"105445aa7843bc8bf206b1200010000/1", false, 0, false}, // 31 digits
	} {
		var tc TraceContext
		ok := parseCloudTrace(c.v, &tc)
		if ok != c.ok || ok && (string(tc.ID[:]) != id || tc.Span != c.span || tc.Sampled != c.sampled) {
			t.Errorf("%q: ok %v %+v, want ok %v span %d", c.v, ok, tc, c.ok, c.span)
		}
	}
}
