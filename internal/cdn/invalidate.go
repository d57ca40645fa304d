package cdn

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/internal/cdnpolicy"
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

// unsafeMethod reports whether m is not one of the safe methods (RFC
// 9110 §9.2.1): a method whose safety is unknown counts as unsafe.
func unsafeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return true
}

// unsafe sends an unsafe request (POST, PUT, DELETE, PATCH, …) to the
// origin and, when the answer is not an error (2xx or 3xx), removes what
// is stored for the request's URI (RFC 9111 §4.4): the object under the
// key this request maps to and, behind a Vary marker, its variants.
// Objects stored under other values of the key's headers or cookies
// (cacheKeyPolicy.includeHttpHeaders, includeNamedCookies) stay.
func (c *Cache) unsafe(w http.ResponseWriter, r *http.Request, q *Request, origin Origin) {
	sw := &statusWriter{ResponseWriter: w}
	origin(sw, r)
	if sw.status < 200 || sw.status >= 400 {
		return
	}
	key := q.Policy.Key.Key(cdnpolicy.KeyInput{Backend: q.Backend, Scheme: q.Scheme, Host: q.Host, Path: q.Path, RawQuery: q.RawQuery, Header: r.Header})
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.mem.Get(key)
	if m == nil && c.disk != nil {
		m = c.disk.Get(key) // also while the tier is held: it is served later
	}
	if m != nil && m.Marker {
		for _, v := range m.Variants {
			c.drop(v)
		}
	}
	c.drop(key)
}

// statusWriter keeps the status an origin answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 || s.status < 200 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the client's writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
