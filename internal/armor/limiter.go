package armor

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

// Rate limiter bounds: each of a rule's shards counts at most
// maxKeysPerShard keys per window and holds as many bans; a key past
// that is not counted (it conforms: the limiter fails open rather than
// refusing clients it cannot track) and Overflow counts it. Key values
// are cut to maxKeyBytes.
const (
	limiterShards   = 16
	maxKeysPerShard = 4096
	maxKeyBytes     = 256
)

// limiter counts a throttle or rate_based_ban rule's requests per key
// with a sliding window: the estimate is the current window's count plus
// the previous window's, weighted by how much of it still overlaps the
// last interval. A throttle counts the requests it lets through, so a
// key sending faster than the threshold gets the threshold; a ban counts
// every request of the key over the ban threshold's interval.
type limiter struct {
	ban                 bool
	count               float64
	interval            time.Duration
	exceedStatus        int
	exceedLocation      string
	banCount            float64
	banInterval, banFor time.Duration
	keys                []config.SecurityKeyConfig
	seed                maphash.Seed
	shards              [limiterShards]limiterShard
	// overflow counts the requests of keys no shard had room for.
	overflow atomic.Uint64
	// id names the rule's rate limit across a fleet (ruleShareID); src,
	// in fleet mode, holds the other instances' counts and bans.
	id  string
	src *RemoteSource
}

type limiterShard struct {
	mu    sync.Mutex
	rate  window
	bans  window // counts for banThreshold
	until map[string]time.Time
}

// window is a sliding-window counter over fixed intervals.
type window struct {
	start     time.Time
	cur, prev map[string]float64
}

func newLimiter(action string, o *config.SecurityRateLimitOptions) *limiter {
	l := &limiter{ban: action == "rate_based_ban", seed: maphash.MakeSeed()}
	if t := o.RateLimitThreshold; t != nil {
		l.count, l.interval = float64(t.Count), time.Duration(t.IntervalSec)*time.Second
	}
	l.exceedStatus = config.ExceedStatus(o.ExceedAction)
	if o.ExceedAction == "redirect" && o.ExceedRedirectOptions != nil {
		l.exceedStatus, l.exceedLocation = 302, o.ExceedRedirectOptions.Target
	}
	if l.ban {
		l.banFor = time.Duration(o.BanDurationSec) * time.Second
		l.banCount, l.banInterval = l.count, l.interval
		if t := o.BanThreshold; t != nil {
			l.banCount, l.banInterval = float64(t.Count), time.Duration(t.IntervalSec)*time.Second
		}
	}
	l.keys = o.EnforceOnKeyConfigs
	if len(l.keys) == 0 {
		l.keys = []config.SecurityKeyConfig{{EnforceOnKeyType: o.EnforceOnKey, EnforceOnKeyName: o.EnforceOnKeyName}}
	}
	return l
}

// apply counts a request that matched the rule and fills in o.
func (l *limiter) apply(o *Outcome, a *activation, now time.Time) {
	o.ConfiguredAction = "THROTTLE"
	if l.ban {
		o.ConfiguredAction = "RATE_BASED_BAN"
	}
	key := l.key(a)
	o.RateLimitKey = key
	remote, remoteBan := l.remoteFor(key, now)
	sh := &l.shards[maphash.String(l.seed, key)%limiterShards]
	sh.mu.Lock()
	verdict := l.count1(sh, key, now, remote, remoteBan)
	sh.mu.Unlock()
	o.RateLimitAction = verdict
	if verdict == "RATE_LIMIT_THRESHOLD_CONFORM" {
		o.Result = "ACCEPT"
		return
	}
	o.Result, o.Status, o.Location = "DENY", l.exceedStatus, l.exceedLocation
	if l.exceedLocation != "" {
		o.Result = "REDIRECT"
	}
}

// count1 counts one request of key in its shard and returns the verdict;
// remote are the other instances' counts of the key (fleet mode) and
// remoteBan whether one of them bans it.
func (l *limiter) count1(sh *limiterShard, key string, now time.Time, remote KeyCount, remoteBan bool) string {
	if until, banned := sh.until[key]; banned {
		if now.Before(until) {
			return "BAN_THRESHOLD_EXCEED"
		}
		delete(sh.until, key)
	}
	if remoteBan {
		return "BAN_THRESHOLD_EXCEED"
	}
	if l.ban && l.banInterval > 0 {
		n, ok := sh.bans.add(key, now, l.banInterval, 1)
		if ok && n+remote.Ban > l.banCount {
			l.banKey(sh, key, now)
			return "BAN_THRESHOLD_EXCEED"
		}
	}
	n, ok := sh.rate.add(key, now, l.interval, 0)
	switch {
	case !ok:
		l.overflow.Add(1)
		return "RATE_LIMIT_THRESHOLD_CONFORM"
	case n+1+remote.Rate > l.count:
		return "RATE_LIMIT_THRESHOLD_EXCEED"
	}
	sh.rate.cur[key]++
	return "RATE_LIMIT_THRESHOLD_CONFORM"
}

// banKey bans key until now + banFor (if the shard has room).
func (l *limiter) banKey(sh *limiterShard, key string, now time.Time) {
	if sh.until == nil {
		sh.until = map[string]time.Time{}
	}
	if len(sh.until) >= maxKeysPerShard {
		for k, u := range sh.until {
			if !now.Before(u) {
				delete(sh.until, k)
			}
		}
		if len(sh.until) >= maxKeysPerShard {
			return
		}
	}
	sh.until[key] = now.Add(l.banFor)
}

// add rolls the window to now, adds inc to key's count and returns the
// key's sliding estimate (before a zero inc's caller adds its own). It
// returns false when the window has no room for a new key.
func (w *window) add(key string, now time.Time, interval time.Duration, inc float64) (float64, bool) {
	w.roll(now, interval)
	c, known := w.cur[key]
	if !known && len(w.cur) >= maxKeysPerShard {
		return 0, false
	}
	c += inc
	w.cur[key] = c
	overlap := 1 - float64(now.Sub(w.start))/float64(interval)
	return c + w.prev[key]*overlap, true
}

// roll starts a new interval when now is past the current one.
func (w *window) roll(now time.Time, interval time.Duration) {
	switch {
	case w.cur == nil:
		w.start, w.cur, w.prev = now.Truncate(interval), map[string]float64{}, map[string]float64{}
	case now.Sub(w.start) >= 2*interval:
		clear(w.cur)
		clear(w.prev)
		w.start = now.Truncate(interval)
	case now.Sub(w.start) >= interval:
		w.prev, w.cur = w.cur, w.prev
		clear(w.cur)
		w.start = w.start.Add(interval)
	}
}

// key returns the request's rate-limit key: the enforceOnKey values
// joined, each cut to maxKeyBytes.
func (l *limiter) key(a *activation) string {
	if len(l.keys) == 1 {
		return keyPart(a, l.keys[0])
	}
	parts := make([]string, len(l.keys))
	for i, k := range l.keys {
		parts[i] = keyPart(a, k)
	}
	return strings.Join(parts, "|")
}

// keyPart is one key's value for the request. A header, cookie or SNI
// that is absent makes the key ALL's (""), as Cloud Armor does.
func keyPart(a *activation, k config.SecurityKeyConfig) string {
	var v string
	switch k.EnforceOnKeyType {
	case "IP", "USER_IP":
		v = a.clientIP().String()
	case "XFF_IP":
		v = a.clientIP().String()
		if first, _, _ := strings.Cut(headerValue(a.r.Header, "X-Forwarded-For"), ","); strings.TrimSpace(first) != "" {
			v = strings.TrimSpace(first)
		}
	case "HTTP_HEADER":
		v = headerValue(a.r.Header, k.EnforceOnKeyName)
	case "HTTP_COOKIE":
		v = cookieValue(a.r.Header, k.EnforceOnKeyName)
	case "HTTP_PATH":
		v = a.r.Path
	case "SNI":
		v = a.r.SNI
	case "REGION_CODE":
		v = a.regionCode()
	}
	if len(v) > maxKeyBytes {
		v = v[:maxKeyBytes]
	}
	return v
}

// cookieValue returns the value of cookie name in the Cookie headers.
func cookieValue(h map[string][]string, name string) string {
	for _, line := range h["Cookie"] {
		for part := range strings.SplitSeq(line, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
			if ok && k == name {
				return v
			}
		}
	}
	return ""
}
