package cdn

import (
	"errors"
	"strings"
	"time"
)

// invalidation is one recent invalidation, kept so that a fill that
// started before it does not store what it fetched.
type invalidation struct {
	at   time.Time
	host string
	path string // exact, or a prefix ending in '*'
}

// keepInvalidations is how long invalidations are remembered for fills
// in flight (longer than any exchange timeout one would configure).
const keepInvalidations = 10 * time.Minute

// ValidatePathPattern checks an invalidation path as Google takes it:
// it starts with '/', and '*' may appear only as its last character,
// after a '/'.
func ValidatePathPattern(p string) error {
	if !strings.HasPrefix(p, "/") {
		return errors.New("the path must start with '/', e.g. /images/*")
	}
	if i := strings.IndexByte(p, '*'); i >= 0 && (i != len(p)-1 || p[i-1] != '/') {
		return errors.New("'*' may only end the path, after a '/', e.g. /images/*")
	}
	return nil
}

func (inv *invalidation) matches(o *Object) bool {
	if inv.host != "" && !strings.EqualFold(inv.host, hostOnly(o.Host)) && !strings.EqualFold(inv.host, o.Host) {
		return false
	}
	if p, ok := strings.CutSuffix(inv.path, "*"); ok {
		return strings.HasPrefix(o.Path, p)
	}
	return o.Path == inv.path
}

func hostOnly(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		return h[:i]
	}
	return h
}

// Invalidate removes the objects whose path matches path (exact, or a
// prefix ending in "/*") and, when host is not "", whose host is host,
// from both tiers, and keeps fills in flight from storing them. It
// returns how many objects (variants and Vary markers included) it
// removed.
func (c *Cache) Invalidate(host, path string) (int, error) {
	if err := ValidatePathPattern(path); err != nil {
		return 0, err
	}
	now := c.now()
	inv := invalidation{at: now, host: host, path: path}
	c.mu.Lock()
	keep := c.invs[:0]
	for _, i := range c.invs {
		if now.Sub(i.at) < keepInvalidations {
			keep = append(keep, i)
		}
	}
	if len(keep) >= 1024 {
		keep = keep[1:]
	}
	c.invs = append(keep, inv)
	c.mu.Unlock()
	n := c.mem.DeleteMatching(inv.matches)
	if c.disk != nil {
		n += c.disk.DeleteMatching(inv.matches)
	}
	return n, nil
}

// invalidatedSince reports whether an invalidation after start matches
// o.
func (c *Cache) invalidatedSince(o *Object, start time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.invs {
		if !c.invs[i].at.Before(start) && c.invs[i].matches(o) {
			return true
		}
	}
	return false
}
