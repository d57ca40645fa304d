package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// CacheHost is the server a CacheShare applies the fleet's cache
// invalidations to (*serve.Server).
type CacheHost interface {
	// InvalidateCache removes the objects of path (exact, or a prefix
	// ending in "/*") and, when host is not "", of host.
	InvalidateCache(host, path string) (int, error)
	// ClearCache removes every object.
	ClearCache() int
	// CacheMark returns the position in the fleet's invalidation log
	// that the stored objects reflect, as SetCacheMark saved it, and
	// whether objects survived a restart (a disk tier that was not empty
	// at start): without such survivors the cache has nothing to catch
	// up on.
	CacheMark() (mark string, survivors bool)
	// SetCacheMark saves the mark where the objects survive (nothing
	// without a disk tier).
	SetCacheMark(mark string) error
	// CacheCaughtUp says the cache reflects every invalidation up to
	// now: the objects that survived a restart may be served.
	CacheCaughtUp()
}

// DefaultInvalidationHistory is how many invalidation records
// cdn/invalidations/ keeps by default (InstanceOptions.
// InvalidationHistory); older ones are deleted, and cdn/floor remembers
// the newest deleted one's revision.
const DefaultInvalidationHistory = 1000

// Invalidation is one record under cdn/invalidations/: Google's
// CacheInvalidationRule, who asked and when.
type Invalidation struct {
	Host     string    `json:"host,omitempty"`
	Path     string    `json:"path"`
	Instance string    `json:"instance"`
	Time     time.Time `json:"time"`
}

// CacheShare spreads Cloud CDN cache invalidations across the fleet: the
// instance an operator asked applies the invalidation and writes it under
// cdn/invalidations/ (Publish); every other instance follows the prefix
// with a watch and applies each record. Records have no lease (an
// instance that was down catches up on them) and are bounded
// (InstanceOptions.InvalidationHistory). An instance knows which records its cache
// reflects by etcd's revision (its mark, saved beside a disk tier): on
// start and after a lost watch it applies the records past its mark, or,
// when it cannot tell (no mark for a disk tier that survived a restart, a
// mark of another etcd cluster, or records past it already deleted), it
// clears its cache.
type CacheShare struct {
	store         *Store
	host          CacheHost
	instance      string
	log           *slog.Logger
	checkInterval time.Duration
	checkTimeout  time.Duration
	history       int

	mu        sync.Mutex
	applied   int64           // etcd revision the cache reflects; 0 before the first catch-up
	dirty     bool            // the cache changed since the mark was last saved
	published map[string]bool // keys this process wrote and applied already
}

func newCacheShare(store *Store, instance string, history int, log *slog.Logger, checkInterval, checkTimeout time.Duration) *CacheShare {
	if history <= 0 {
		history = DefaultInvalidationHistory
	}
	if checkInterval <= 0 {
		checkInterval = 2 * time.Second
	}
	if checkTimeout <= 0 {
		checkTimeout = 3 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &CacheShare{store: store, instance: instance, history: history, log: log, checkInterval: checkInterval,
		checkTimeout: checkTimeout, published: map[string]bool{}}
}

// Applied returns the etcd revision up to which the instance's cache
// reflects the fleet's invalidations; 0 before its first catch-up (the
// disk tier is held until then).
func (c *CacheShare) Applied() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applied
}

func (c *CacheShare) prefix() string   { return c.store.prefix + "cdn/invalidations/" }
func (c *CacheShare) floorKey() string { return c.store.prefix + "cdn/floor" }

// Publish writes an invalidation the server has applied already, for
// the other instances, and trims the records past the history bound.
func (c *CacheShare) Publish(ctx context.Context, host, path string) error {
	var id [4]byte
	_, _ = rand.Read(id[:])
	now := time.Now()
	key := fmt.Sprintf("%s%020d-%s", c.prefix(), now.UnixNano(), hex.EncodeToString(id[:]))
	b, err := json.Marshal(Invalidation{Host: host, Path: path, Instance: c.instance, Time: now.UTC()})
	if err != nil {
		return fmt.Errorf("fleet: encode the invalidation: %w", err)
	}
	c.mu.Lock()
	c.published[key] = true
	c.mu.Unlock()
	tctx, cancel := context.WithTimeout(ctx, c.checkTimeout)
	defer cancel()
	if _, err := c.store.cl.Put(tctx, key, string(b)); err != nil {
		c.mu.Lock()
		delete(c.published, key)
		c.mu.Unlock()
		return fmt.Errorf("fleet: write %s: %w", key, err)
	}
	if err := c.trim(tctx); err != nil {
		c.log.Warn("fleet: trimming the cache invalidation records", "err", err)
	}
	return nil
}

// trim deletes the oldest records past the history bound and raises the
// floor to the newest deleted one's revision, in one transaction per
// chunk (so that a reader never sees records gone and the floor not yet
// raised), which fails when another instance trims at the same time:
// then the next Publish trims.
func (c *CacheShare) trim(ctx context.Context) error {
	resp, err := c.store.cl.Txn(ctx).Then(
		clientv3.OpGet(c.prefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend)),
		clientv3.OpGet(c.floorKey())).Commit()
	if err != nil {
		return err
	}
	records, floorKV := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	var floor, floorMod int64
	if len(floorKV) > 0 {
		floorMod = floorKV[0].ModRevision
		floor, _ = strconv.ParseInt(string(floorKV[0].Value), 10, 64)
	}
	over := records[:max(len(records)-c.history, 0)]
	for len(over) > 0 {
		chunk := over[:min(len(over), 100)]
		over = over[len(chunk):]
		ops := make([]clientv3.Op, 0, len(chunk)+1)
		for _, kv := range chunk {
			ops = append(ops, clientv3.OpDelete(string(kv.Key)))
		}
		floor = max(floor, chunk[len(chunk)-1].ModRevision)
		ops = append(ops, clientv3.OpPut(c.floorKey(), strconv.FormatInt(floor, 10)))
		r, err := c.store.cl.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(c.floorKey()), "=", floorMod)).Then(ops...).Commit()
		if err != nil || !r.Succeeded {
			return err
		}
		floorMod = r.Header.Revision
	}
	return nil
}

// up catches up with the records past the mark, then follows the prefix
// until the watch or a check fails (or ctx ends).
func (c *CacheShare) up(ctx context.Context, _ *session) (bool, error) {
	rev, err := c.catchUp(ctx)
	if err != nil {
		return false, err
	}
	wch := c.store.cl.Watch(clientv3.WithRequireLeader(ctx), c.prefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	tick := time.NewTicker(c.checkInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case wr, ok := <-wch:
			if !ok {
				return true, errors.New("fleet: the watch of the cache invalidations ended")
			}
			if err := wr.Err(); err != nil {
				return true, fmt.Errorf("fleet: watch of the cache invalidations: %w", err)
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					c.apply(string(ev.Kv.Key), ev.Kv.Value)
				}
			}
			c.setApplied(wr.Header.Revision, wr.Header.ClusterId)
		case <-tick.C:
			// A watch that went quiet without failing: read what it
			// would have brought.
			if _, err := c.catchUp(ctx); err != nil {
				return true, err
			}
		}
	}
}

// catchUp applies the records past the mark, or clears the cache when
// it cannot tell which it missed, and returns the revision it read at.
func (c *CacheShare) catchUp(ctx context.Context) (int64, error) {
	c.mu.Lock()
	applied := c.applied
	c.mu.Unlock()
	tctx, cancel := context.WithTimeout(ctx, c.checkTimeout)
	defer cancel()
	resp, err := c.store.cl.Txn(tctx).Then(
		clientv3.OpGet(c.prefix(), clientv3.WithPrefix(), clientv3.WithMinModRev(applied+1),
			clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend)),
		clientv3.OpGet(c.floorKey())).Commit()
	if err != nil {
		return 0, fmt.Errorf("fleet: read the cache invalidations: %w", err)
	}
	rev, cluster := resp.Header.Revision, resp.Header.ClusterId
	records, floorKV := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	var floor int64
	if len(floorKV) > 0 {
		floor, _ = strconv.ParseInt(string(floorKV[0].Value), 10, 64)
	}
	if applied == 0 {
		applied = c.startMark(cluster, rev)
	}
	switch {
	case applied < 0 || applied < floor:
		n := 0
		if c.host != nil {
			n = c.host.ClearCache()
		}
		if n > 0 {
			c.log.Warn("fleet: cleared the cache: it may hold objects invalidated while this instance was away, and the records of which are gone",
				"removed", n, "mark", applied, "floor", floor)
		}
		c.mu.Lock()
		clear(c.published)
		c.dirty = true
		c.mu.Unlock()
	default:
		for _, kv := range records {
			if kv.ModRevision > applied {
				c.apply(string(kv.Key), kv.Value)
			}
		}
	}
	c.setApplied(rev, cluster)
	if c.host != nil {
		c.host.CacheCaughtUp()
	}
	return rev, nil
}

// startMark is where an instance's cache stands at its first catch-up:
// its saved mark when it matches this log; when nothing survived a
// restart (the cache started empty), the revision of the process's first
// read of the fleet (Start, before the cache was made; 0, every record
// kept, when etcd did not answer then); -1 when objects survived without
// a mark it can use.
func (c *CacheShare) startMark(cluster uint64, rev int64) int64 {
	if c.host == nil {
		return rev
	}
	mark, survivors := c.host.CacheMark()
	if !survivors {
		c.mu.Lock()
		c.dirty = true // save a mark for the next start
		c.mu.Unlock()
		return min(c.store.firstRead.Load(), rev)
	}
	log, at, ok := strings.Cut(mark, "@")
	n, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || log != c.logID(cluster) || n > rev {
		return -1
	}
	return n
}

// logID names the invalidation log: etcd's cluster and the prefix.
func (c *CacheShare) logID(cluster uint64) string {
	return strconv.FormatUint(cluster, 16) + c.store.prefix
}

// apply applies one record (unless this process wrote it, and applied
// it before writing).
func (c *CacheShare) apply(key string, value []byte) {
	c.mu.Lock()
	mine := c.published[key]
	delete(c.published, key)
	c.mu.Unlock()
	if mine || c.host == nil {
		return
	}
	var inv Invalidation
	if err := json.Unmarshal(value, &inv); err != nil {
		c.log.Error("fleet: ignored an unreadable cache invalidation", "key", key, "err", err)
		return
	}
	n, err := c.host.InvalidateCache(inv.Host, inv.Path)
	c.mu.Lock()
	c.dirty = true
	c.mu.Unlock()
	if err != nil {
		c.log.Error("fleet: ignored a cache invalidation", "key", key, "path", inv.Path, "err", err)
		return
	}
	c.log.Info("cache invalidated from the fleet", "path", inv.Path, "host", inv.Host, "by", inv.Instance, "removed", n)
}

// setApplied records that the cache reflects every record up to rev,
// and saves it as the mark when the cache changed since the last save (a
// mark not moved past revisions without records stays as true).
func (c *CacheShare) setApplied(rev int64, cluster uint64) {
	c.mu.Lock()
	if rev > c.applied {
		c.applied = rev
	}
	save := c.dirty
	c.dirty = false
	c.mu.Unlock()
	if !save || c.host == nil {
		return
	}
	if err := c.host.SetCacheMark(c.logID(cluster) + "@" + strconv.FormatInt(rev, 10)); err != nil {
		c.log.Warn("fleet: could not save the cache's invalidation mark", "err", err)
		c.mu.Lock()
		c.dirty = true
		c.mu.Unlock()
	}
}

// down keeps the cache: objects invalidated meanwhile are found on the
// next catch-up.
func (c *CacheShare) down(context.Context, error) {}

func (c *CacheShare) idle(ctx context.Context, d time.Duration) { pause(ctx, d) }
