package cdn

import (
	"os"
	"path/filepath"
	"testing"
)

func mustWrite(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(target, link string) error { return os.Symlink(target, link) }

func (c *Cache) pendingFills() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.fills)
}

func (c *Cache) pendingRefreshes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.refreshing)
}
