package rrl

import (
	"fmt"
	"hash/maphash"
	"net/netip"
	"testing"
	"time"
	"unsafe"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// rates returns Rates with every class at r.
func rates(r int) [NumClasses]int {
	var rs [NumClasses]int
	for i := range rs {
		rs[i] = r
	}
	return rs
}

// tally counts the actions of n responses of one key at one instant.
func tally(l *Limiter, client string, c Class, name string, n int, now time.Time) map[Action]int {
	got := map[Action]int{}
	a := netip.MustParseAddr(client)
	for range n {
		got[l.Check(a, c, 1, name, now)]++
	}
	return got
}

// With the clock still, a key gets its rate's worth of responses (the
// one-second burst) and the rest are limited, every slip-th slipped.
func TestBurstThenSlip(t *testing.T) {
	for _, tc := range []struct {
		rate, slip, n int
	}{
		{5, 0, 20}, {5, 1, 20}, {5, 2, 20}, {5, 2, 21}, {5, 3, 20}, {1, 10, 50}, {100, 2, 100}, {100, 2, 101},
	} {
		t.Run(fmt.Sprintf("rate%d-slip%d-n%d", tc.rate, tc.slip, tc.n), func(t *testing.T) {
			l := New(Config{Rates: rates(tc.rate), Slip: tc.slip}, t0, maphash.MakeSeed())
			got := tally(l, "192.0.2.1", Answer, "www.example.", tc.n, t0)
			limited := max(tc.n-tc.rate, 0)
			slipped := 0
			if tc.slip > 0 {
				slipped = limited / tc.slip
			}
			want := map[Action]int{Send: min(tc.n, tc.rate), Slip: slipped, Drop: limited - slipped}
			for _, a := range []Action{Send, Slip, Drop} {
				if got[a] != want[a] {
					t.Errorf("%v: %d, want %d (all: %v)", a, got[a], want[a], got)
				}
			}
			if s, d := l.Stats().Limited(Answer, Slip), l.Stats().Limited(Answer, Drop); int(s) != want[Slip] || int(d) != want[Drop] {
				t.Errorf("stats: slipped %d dropped %d, want %d %d", s, d, want[Slip], want[Drop])
			}
		})
	}
}

// What a response is counted by: the client's prefix (configurable
// lengths), its class, and the name (and type, for answers), case and
// final dot aside; errors by the prefix alone.
func TestKeys(t *testing.T) {
	type resp struct {
		client string
		class  Class
		qtype  uint16
		name   string
	}
	a := resp{"192.0.2.1", Answer, 1, "www.example."}
	for _, tc := range []struct {
		desc   string
		cfg    Config
		first  resp
		second resp
		shared bool
	}{
		{"same /24", Config{}, a, resp{"192.0.2.200", Answer, 1, "www.example."}, true},
		{"other /24", Config{}, a, resp{"192.0.3.1", Answer, 1, "www.example."}, false},
		{"/32 configured", Config{IPv4Bits: 32}, a, resp{"192.0.2.2", Answer, 1, "www.example."}, false},
		{"v4-mapped is v4", Config{}, a, resp{"::ffff:192.0.2.9", Answer, 1, "www.example."}, true},
		{"same /56", Config{}, resp{"2001:db8:0:100::1", Answer, 1, "a."}, resp{"2001:db8:0:1ff::2", Answer, 1, "a."}, true},
		{"other /56", Config{}, resp{"2001:db8:0:100::1", Answer, 1, "a."}, resp{"2001:db8:0:200::1", Answer, 1, "a."}, false},
		{"/64 configured", Config{IPv6Bits: 64}, resp{"2001:db8::1", Answer, 1, "a."}, resp{"2001:db8:0:1::1", Answer, 1, "a."}, false},
		{"case and dot", Config{}, a, resp{"192.0.2.1", Answer, 1, "WWW.Example"}, true},
		{"other name", Config{}, a, resp{"192.0.2.1", Answer, 1, "mail.example."}, false},
		{"other type", Config{}, a, resp{"192.0.2.1", Answer, 28, "www.example."}, false},
		{"other class", Config{}, resp{"192.0.2.1", NXDomain, 1, "example."}, resp{"192.0.2.1", NoData, 1, "example."}, false},
		{"denial ignores type", Config{}, resp{"192.0.2.1", NXDomain, 1, "example."}, resp{"192.0.2.1", NXDomain, 28, "example."}, true},
		{"errors ignore name", Config{}, resp{"192.0.2.1", Error, 1, "a."}, resp{"192.0.2.1", Error, 16, "b."}, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tc.cfg.Rates = rates(1)
			l := New(tc.cfg, t0, maphash.MakeSeed())
			check := func(r resp) Action {
				return l.Check(netip.MustParseAddr(r.client), r.class, r.qtype, r.name, t0)
			}
			if got := check(tc.first); got != Send {
				t.Fatalf("first response: %v", got)
			}
			if got := check(tc.second); (got != Send) != tc.shared {
				t.Errorf("second response %v; shared key %v", got, tc.shared)
			}
		})
	}
}

// Classes with rate 0 and exempt prefixes are never limited, nor counted
// (an exempt host does not spend its /24's budget).
func TestUnlimited(t *testing.T) {
	cfg := Config{Rates: rates(2), Exempt: []netip.Prefix{netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("2001:db8::/32")}}
	cfg.Rates[Error] = 0
	l := New(cfg, t0, maphash.MakeSeed())
	for _, tc := range []struct {
		client string
		class  Class
	}{
		{"192.0.2.7", Answer}, {"2001:db8:1::1", NXDomain}, {"198.51.100.1", Error},
	} {
		if got := tally(l, tc.client, tc.class, "x.", 50, t0); got[Send] != 50 {
			t.Errorf("%s %v: %v, want every one sent", tc.client, tc.class, got)
		}
	}
	if got := tally(l, "192.0.2.8", Answer, "x.", 3, t0); got[Send] != 2 {
		t.Errorf("the exempt host's neighbour: %v, want 2 sent (the exempt host spent nothing)", got)
	}
}

// Dry run counts what it would limit and sends everything.
func TestDryRun(t *testing.T) {
	l := New(Config{Rates: rates(3), DryRun: true, Slip: 2}, t0, maphash.MakeSeed())
	if got := tally(l, "192.0.2.1", NoData, "example.", 13, t0); got[Send] != 13 {
		t.Fatalf("dry run: %v", got)
	}
	if s, d := l.Stats().Limited(NoData, Slip), l.Stats().Limited(NoData, Drop); s != 5 || d != 5 {
		t.Errorf("dry run counted %d slipped %d dropped, want 5 and 5", s, d)
	}
}

// The balance over time, as BIND's: rate per second of credit up to one
// second's worth; a flood runs up debt to window seconds' worth, during
// which the prefix gets nothing, and once it stops it is answered again
// after paying the debt back.
func TestRefillAndDebt(t *testing.T) {
	const rate, window = 10, 3
	at := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	for _, tc := range []struct {
		desc  string
		steps []struct {
			at   float64
			n    int
			sent int
		}
	}{
		{"steady under the rate", []struct {
			at   float64
			n    int
			sent int
		}{{0, 10, 10}, {1, 10, 10}, {2, 10, 10}, {2.5, 6, 5}, {2.7, 2, 1}}},
		{"idle time credits one second at most", []struct {
			at   float64
			n    int
			sent int
		}{{0, 1, 1}, {100, 20, 10}}},
		{"debt is window seconds", []struct {
			at   float64
			n    int
			sent int
		}{{0, 1000, 10}, {window - 0.1, 1, 0}, {window + 0.25, 3, 1}}},
		{"a sustained flood over the rate gets nothing", []struct {
			at   float64
			n    int
			sent int
		}{{0, 20, 10}, {1, 20, 0}, {2, 20, 0}, {3, 20, 0}, {4, 20, 0}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			l := New(Config{Rates: rates(rate), Window: window}, t0, maphash.MakeSeed())
			for _, s := range tc.steps {
				got := tally(l, "192.0.2.1", Answer, "a.", s.n, at(s.at))
				if got[Send] != s.sent {
					t.Errorf("at %.1f s, %d responses: %d sent, want %d", s.at, s.n, got[Send], s.sent)
				}
			}
		})
	}
}

// A reload with the same table size keeps the counts; another size
// starts a new table; the counters carry either way.
func TestCarry(t *testing.T) {
	cfg := Config{Rates: rates(2), Slip: 0}
	l := New(cfg, t0, maphash.MakeSeed())
	tally(l, "192.0.2.1", Answer, "a.", 5, t0)
	kept := l.Carry(cfg)
	if got := tally(kept, "192.0.2.1", Answer, "a.", 1, t0); got[Drop] != 1 {
		t.Errorf("same table: %v, want the key still limited", got)
	}
	cfg.TableSize = 4 * DefaultTableSize
	fresh := kept.Carry(cfg)
	if got := tally(fresh, "192.0.2.1", Answer, "a.", 1, t0); got[Send] != 1 {
		t.Errorf("new table: %v, want a fresh count", got)
	}
	if got := fresh.Stats().Limited(Answer, Drop); got != 4 {
		t.Errorf("dropped across reloads: %d, want 4", got)
	}
}

// A set keeps its most recently used keys: a key in use survives a
// stream of new keys through its set, and evicting one in debt counts.
func TestTableLRU(t *testing.T) {
	tb := newTable(MinTableSize)
	st := new(Stats)
	sameSet := func(i int) uint64 { return uint64(i+1) * (tb.mask + 1) << 32 } // all in set 0
	hot := sameSet(0)
	tick := int64(0)
	for range 3 {
		tb.debit(hot, tick, 1, 5, st)
	}
	for i := 1; i <= 100; i++ {
		tick += int64(time.Millisecond)
		tb.debit(sameSet(i), tick, 1, 5, st)
		if limited, _ := tb.debit(hot, tick, 1, 5, st); !limited {
			t.Fatalf("after %d new keys the hot key is no longer limited (evicted)", i)
		}
	}
	if st.Evictions() != 0 {
		t.Errorf("%d evictions of keys in debt; the new keys had none", st.Evictions())
	}
	// Nine keys in debt in one set of eight: one is evicted.
	tb2, st2 := newTable(MinTableSize), new(Stats)
	for i := range ways + 1 {
		tb2.debit(sameSet(i), int64(i), 1, 5, st2)
		tb2.debit(sameSet(i), int64(i), 1, 5, st2)
	}
	if st2.Evictions() != 1 {
		t.Errorf("evictions: %d, want 1", st2.Evictions())
	}
}

// Table sizes round up to a power of two of sets of eight.
func TestTableSize(t *testing.T) {
	for _, tc := range []struct{ size, sets int }{{1, 1}, {8, 1}, {9, 2}, {1024, 128}, {1000, 128}, {65536, 8192}, {65537, 16384}} {
		if got := tableSets(tc.size); got != tc.sets {
			t.Errorf("tableSets(%d) = %d, want %d", tc.size, got, tc.sets)
		}
	}
	if l := New(Config{TableSize: 1}, t0, maphash.MakeSeed()); len(l.t.sets)*ways != MinTableSize {
		t.Errorf("a tiny table has %d entries, want the minimum %d", len(l.t.sets)*ways, MinTableSize)
	}
}

// The bucket gives rate tokens per second with a one-second burst, and a
// reload keeps it (same rate) or its refusal count (new rate).
func TestBucket(t *testing.T) {
	b := NewBucket(5, t0)
	take := func(n int, at time.Duration) int {
		ok := 0
		for range n {
			if b.Take(t0.Add(at)) {
				ok++
			}
		}
		return ok
	}
	for _, tc := range []struct {
		at       time.Duration
		n, taken int
	}{
		{0, 10, 5}, {200 * time.Millisecond, 10, 1}, {time.Hour, 10, 5}, {time.Hour + 100*time.Millisecond, 1, 0},
	} {
		if got := take(tc.n, tc.at); got != tc.taken {
			t.Errorf("at %v: took %d of %d, want %d", tc.at, got, tc.n, tc.taken)
		}
	}
	if b.Refused() != 5+9+5+1 {
		t.Errorf("refused %d, want 20", b.Refused())
	}
	if b.Carry(5, t0) != b {
		t.Error("Carry with the same rate made a new bucket")
	}
	if n := b.Carry(7, t0); n.Rate() != 7 || n.Refused() != b.Refused() {
		t.Errorf("Carry(7): rate %d refused %d", n.Rate(), n.Refused())
	}
}

// The memory bound docs/dns.md states: 32 bytes an entry, a set of 8
// with its lock 264.
func TestEntrySize(t *testing.T) {
	if e, s := unsafe.Sizeof(entry{}), unsafe.Sizeof(set{}); e != 32 || s != 8*32+8 {
		t.Errorf("entry %d bytes, set %d; docs/dns.md says 32 and 264", e, s)
	}
}
