package cdn

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// Clear removes every object from both tiers (and keeps fills in flight
// from storing), as an invalidation of "/*" on every host does. It
// returns how many objects it removed.
func (c *Cache) Clear() int {
	n, _ := c.Invalidate("", "/*")
	return n
}

// markFile is the file, in the disk tier's directory, holding the mark.
// (The tier's own files are named by 64 hex digits.)
const markFile = "invalidation-mark"

// Mark returns what SetMark saved beside the disk tier ("" when nothing
// was), and whether objects survived from before this start (the disk
// tier held some when it was opened): without survivors the cache has no
// position in an invalidation log to catch up from.
func (c *Cache) Mark() (mark string, survivors bool) {
	if c.disk == nil {
		return "", false
	}
	b, err := os.ReadFile(filepath.Join(c.disk.dir, markFile))
	if err != nil {
		return "", c.disk.found > 0
	}
	return strings.TrimSpace(string(b)), c.disk.found > 0
}

// SetMark saves mark beside the disk tier: the position in an external
// invalidation log (the fleet's) that the stored objects reflect. It
// does nothing without a disk tier.
func (c *Cache) SetMark(mark string) error {
	if c.disk == nil {
		return nil
	}
	p := filepath.Join(c.disk.dir, markFile)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(mark+"\n"), 0o600); err != nil {
		return fmt.Errorf("cdn: save the invalidation mark: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("cdn: save the invalidation mark: %w", err)
	}
	return nil
}
