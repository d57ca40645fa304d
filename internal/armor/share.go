package armor

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"
)

// Fleet-wide rate limits. In fleet mode each instance keeps counting its
// own requests in its limiters, as standalone, and every share interval
// (package fleet: 1 s) exports its heaviest keys (Set.Export) for the
// other instances; each instance merges the others' exports
// (MergeShares) into a Remote, which its limiters add to their own
// counts on every request. docs/security-policies.md gives the accuracy.
const (
	// MaxSharedKeys bounds the keys one rule exports per interval: its
	// heaviest, relative to their thresholds (and as many bans, the
	// latest to end first kept).
	MaxSharedKeys = 256
	// shareFloorDiv: a key is exported when its count reaches the
	// threshold / (shareFloorDiv × instances), so the counts no instance
	// exports add up to at most a tenth of the threshold fleet-wide.
	shareFloorDiv = 10
)

// RateShare is one instance's export of its rate limits' counts and bans.
type RateShare struct {
	Rules []RuleShare `json:"rules,omitempty"`
}

// RuleShare is one throttle or rate_based_ban rule's export. Rule names
// the rule and its rate limit options (ruleShareID), so instances that
// run different options for a rule do not add up each other's counts.
type RuleShare struct {
	Rule   string     `json:"rule"`
	Counts []KeyCount `json:"counts,omitempty"`
	Bans   []KeyBan   `json:"bans,omitempty"`
}

// KeyCount is a key's sliding count: Rate for rateLimitThreshold (the
// requests that conformed), Ban for banThreshold (every request). Key is
// ShareKey of the key's value: client addresses, cookies and header
// values never leave the instance.
type KeyCount struct {
	Key  string  `json:"k"`
	Rate float64 `json:"r,omitempty"`
	Ban  float64 `json:"b,omitempty"`
}

// KeyBan is a key banned until UntilMs (Unix milliseconds).
type KeyBan struct {
	Key     string `json:"k"`
	UntilMs int64  `json:"u"`
}

// ShareKey is how a rate limit key travels between instances: the first
// 96 bits of its SHA-256, in base64 (16 characters).
func ShareKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// ruleShareID names a rule's rate limit across instances: its policy,
// priority, and a digest of its action and rate limit options.
func ruleShareID(policy string, priority int64, limitID string) string {
	sum := sha256.Sum256([]byte(limitID))
	return fmt.Sprintf("%s/%d/%x", policy, priority, sum[:6])
}

// Remote is the other instances' counts and bans, merged, for every
// rule that has some. It is immutable once built.
type Remote struct {
	rules map[string]*remoteRule
}

type remoteRule struct {
	counts map[string]KeyCount // by ShareKey; Rate and Ban summed
	bans   map[string]time.Time
}

// RemoteSource holds the Remote the limiters read on every request; the
// fleet stores a new one whenever another instance's export changes.
type RemoteSource struct{ p atomic.Pointer[Remote] }

// Store makes r the remote counts (nil: none).
func (s *RemoteSource) Store(r *Remote) { s.p.Store(r) }

// Load returns the remote counts (nil: none).
func (s *RemoteSource) Load() *Remote {
	if s == nil {
		return nil
	}
	return s.p.Load()
}

// MergeShares adds up the exports of the other instances; with bansOnly
// the counts are left out (etcd lost: the bans, which end by the clock,
// still hold, while counts would only grow stale).
func MergeShares(shares []RateShare, bansOnly bool) *Remote {
	r := &Remote{rules: map[string]*remoteRule{}}
	for _, sh := range shares {
		for _, rs := range sh.Rules {
			rr := r.rules[rs.Rule]
			if rr == nil {
				rr = &remoteRule{counts: map[string]KeyCount{}, bans: map[string]time.Time{}}
				r.rules[rs.Rule] = rr
			}
			for _, c := range rs.Counts {
				if bansOnly {
					break
				}
				sum := rr.counts[c.Key]
				sum.Rate += c.Rate
				sum.Ban += c.Ban
				rr.counts[c.Key] = sum
			}
			for _, b := range rs.Bans {
				if u := time.UnixMilli(b.UntilMs); u.After(rr.bans[b.Key]) {
					rr.bans[b.Key] = u
				}
			}
		}
	}
	return r
}

// UseRemote makes every rate limit of s add src's counts and bans to its
// own (fleet mode).
func (s *Set) UseRemote(src *RemoteSource) {
	for _, l := range s.limiters() {
		l.src = src
	}
}

// limiters lists s's rate limits, in policy name and priority order.
func (s *Set) limiters() []*limiter {
	if s == nil {
		return nil
	}
	var out []*limiter
	for _, name := range slices.Sorted(maps.Keys(s.policies)) {
		for _, r := range s.policies[name].rules {
			if r.limit != nil {
				out = append(out, r.limit)
			}
		}
	}
	return out
}

// Export returns what this instance tells the others at now, when
// instances run in the fleet (this one included): for each rate limit,
// up to MaxSharedKeys keys whose sliding count reaches 1/(10 ×
// instances) of their threshold, heaviest first, and up to
// MaxSharedKeys of its own bans still in force. Rules with nothing to
// say are left out.
func (s *Set) Export(now time.Time, instances int) RateShare {
	var out RateShare
	for _, l := range s.limiters() {
		if rs := l.export(now, max(instances, 1)); len(rs.Counts)+len(rs.Bans) > 0 {
			out.Rules = append(out.Rules, rs)
		}
	}
	return out
}

// heavy is one key's counts, relative to the thresholds, for Export.
type heavy struct {
	key       string
	rate, ban float64
	weight    float64
}

func (l *limiter) export(now time.Time, instances int) RuleShare {
	rs := RuleShare{Rule: l.id}
	rateFloor := l.count / float64(shareFloorDiv*instances)
	banFloor := l.banCount / float64(shareFloorDiv*instances)
	var keys []heavy
	var bans []KeyBan
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		keys = sh.heavyKeys(keys, now, l, rateFloor, banFloor)
		for k, u := range sh.until {
			if now.Before(u) {
				bans = append(bans, KeyBan{Key: k, UntilMs: u.UnixMilli()})
			}
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(keys, func(a, b heavy) int { return cmp.Compare(b.weight, a.weight) })
	for _, h := range keys[:min(len(keys), MaxSharedKeys)] {
		rs.Counts = append(rs.Counts, KeyCount{Key: ShareKey(h.key), Rate: h.rate, Ban: h.ban})
	}
	slices.SortFunc(bans, func(a, b KeyBan) int { return cmp.Compare(b.UntilMs, a.UntilMs) })
	for _, b := range bans[:min(len(bans), MaxSharedKeys)] {
		rs.Bans = append(rs.Bans, KeyBan{Key: ShareKey(b.Key), UntilMs: b.UntilMs})
	}
	return rs
}

// heavyKeys appends the shard's keys whose sliding counts at now reach a
// floor.
func (sh *limiterShard) heavyKeys(keys []heavy, now time.Time, l *limiter, rateFloor, banFloor float64) []heavy {
	seen := map[string]bool{}
	for _, m := range []map[string]float64{sh.rate.cur, sh.rate.prev, sh.bans.cur, sh.bans.prev} {
		for k := range m {
			if seen[k] {
				continue
			}
			seen[k] = true
			h := heavy{key: k, rate: sh.rate.estimate(k, now, l.interval)}
			if l.ban {
				h.ban = sh.bans.estimate(k, now, l.banInterval)
			}
			if h.rate < max(rateFloor, 1) && (!l.ban || h.ban < max(banFloor, 1)) {
				continue
			}
			h.weight = h.rate / max(l.count, 1)
			if l.ban {
				h.weight = max(h.weight, h.ban/max(l.banCount, 1))
			}
			keys = append(keys, h)
		}
	}
	return keys
}

// estimate is key's sliding count at now without rolling the window
// (the next request does).
func (w *window) estimate(key string, now time.Time, interval time.Duration) float64 {
	if w.cur == nil || interval <= 0 {
		return 0
	}
	age := now.Sub(w.start)
	switch {
	case age >= 2*interval:
		return 0
	case age >= interval: // cur is the previous interval now
		return w.cur[key] * (1 - float64(age-interval)/float64(interval))
	}
	return w.cur[key] + w.prev[key]*(1-float64(age)/float64(interval))
}

// remoteFor returns the other instances' counts of key and whether one
// of them bans it at now (zero without a fleet).
func (l *limiter) remoteFor(key string, now time.Time) (KeyCount, bool) {
	r := l.src.Load()
	if r == nil {
		return KeyCount{}, false
	}
	rr := r.rules[l.id]
	if rr == nil {
		return KeyCount{}, false
	}
	h := ShareKey(key)
	return rr.counts[h], now.Before(rr.bans[h])
}
