package rrl

import (
	"hash/maphash"
	"net/netip"
	"testing"
	"time"
)

// FuzzLimiter drives a Limiter with a byte string of responses (client,
// class, name, time step) and checks what holds for every key whatever
// the traffic: it is never sent more than its burst plus its rate over
// the time since its first response, and of its limited responses
// exactly every slip-th is slipped.
func FuzzLimiter(f *testing.F) {
	f.Add([]byte{3, 2, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 5, 2, 7, 0})
	f.Add([]byte{1, 0, 1, 1, 255, 2, 2, 255, 3, 3, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) < 2 || len(ops) > 3000 {
			return
		}
		rate, slip := int(ops[0]%8)+1, int(ops[1]%4)
		l := New(Config{Rates: rates(rate), Slip: slip, Window: 2, TableSize: MinTableSize}, t0, maphash.MakeSeed())
		clients := []netip.Addr{
			netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.99"),
			netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("2001:db8::1"),
		}
		type key struct {
			prefix int // index of the client's prefix (192.0.2.1 and .99 share one)
			class  Class
			name   int
		}
		type count struct {
			first                time.Time
			sent, limited, slips int
		}
		counts := map[key]*count{}
		now := t0
		for i := 2; i+2 < len(ops); i += 3 {
			ci, cn, dt := int(ops[i]%4), ops[i+1], ops[i+2]
			now = now.Add(time.Duration(dt) * time.Millisecond)
			class, name := Class(cn%uint8(NumClasses)), int(cn/uint8(NumClasses))%3
			prefix := ci
			if ci == 1 {
				prefix = 0
			}
			k := key{prefix, class, name}
			if class == Error {
				k.name = 0
			}
			c := counts[k]
			if c == nil {
				c = &count{first: now}
				counts[k] = c
			}
			switch l.Check(clients[ci], class, 1, []string{"a.", "b.", "c."}[name], now) {
			case Send:
				c.sent++
			case Slip:
				c.limited++
				c.slips++
			case Drop:
				c.limited++
			}
			if allowed := rate + int(now.Sub(c.first).Seconds()*float64(rate)); c.sent > allowed {
				t.Fatalf("key %+v: %d sent by %v, more than %d", k, c.sent, now.Sub(c.first), allowed)
			}
			want := 0
			if slip > 0 {
				want = c.limited / slip
			}
			if c.slips != want {
				t.Fatalf("key %+v: %d slipped of %d limited, want %d (slip %d)", k, c.slips, c.limited, want, slip)
			}
		}
	})
}
