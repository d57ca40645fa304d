package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// CertStorage keeps the ACME state of MANAGED certificates (certmagic's
// accounts, keys, certificates, challenge tokens) in the fleet's etcd, so
// a fleet orders each certificate once and every instance serves it: a
// certmagic.Storage. Each value lives under acme/data/<key> with its
// modification time and size under acme/meta/<key> (written in one
// transaction), so `etcdctl get` shows the PEM as it is. Locks (certmagic
// takes one around an order or a renewal) are etcd's concurrency.Mutex
// under acme/locks/<name>, each on a lease of its own kept alive while
// held: a holder that dies releases its lock when the lease's TTL runs
// out, one that unlocks releases it at once.
type CertStorage struct {
	store   *Store
	lockTTL time.Duration
	timeout time.Duration

	mu    sync.Mutex
	locks map[string]*heldLock
}

// heldLock is a lock this process holds and the session it lives on.
type heldLock struct {
	sess *concurrency.Session
	mu   *concurrency.Mutex
}

// certMeta is what acme/meta/<key> holds.
type certMeta struct {
	Modified time.Time `json:"modified"`
	Size     int64     `json:"size"`
}

var (
	_ certmagic.Storage   = (*CertStorage)(nil)
	_ certmagic.TryLocker = (*CertStorage)(nil)
)

// NewCertStorage returns the fleet's certificate storage; lockTTL is the
// TTL of a held lock's lease (default 10 s, the instances' lease TTL).
func NewCertStorage(store *Store, lockTTL time.Duration) *CertStorage {
	if lockTTL <= 0 {
		lockTTL = 10 * time.Second
	}
	return &CertStorage{store: store, lockTTL: lockTTL, timeout: 5 * time.Second, locks: map[string]*heldLock{}}
}

func (c *CertStorage) dataKey(key string) string { return c.store.prefix + "acme/data/" + clean(key) }
func (c *CertStorage) metaKey(key string) string { return c.store.prefix + "acme/meta/" + clean(key) }
func (c *CertStorage) lockKey(name string) string {
	return c.store.prefix + "acme/locks/" + clean(name)
}

// clean is a certmagic key without leading or trailing slashes.
func clean(key string) string { return strings.Trim(key, "/") }

// call runs f with the storage's timeout under ctx.
func (c *CertStorage) call(ctx context.Context, f func(context.Context) error) error {
	tctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return f(tctx)
}

// Store puts value at key.
func (c *CertStorage) Store(ctx context.Context, key string, value []byte) error {
	meta, err := json.Marshal(certMeta{Modified: time.Now().UTC(), Size: int64(len(value))})
	if err != nil {
		return err
	}
	err = c.call(ctx, func(ctx context.Context) error {
		_, err := c.store.cl.Txn(ctx).Then(clientv3.OpPut(c.dataKey(key), string(value)), clientv3.OpPut(c.metaKey(key), string(meta))).Commit()
		return err
	})
	if err != nil {
		return fmt.Errorf("fleet: store %s in etcd: %w", key, err)
	}
	return nil
}

// Load returns the value at key (an error wrapping fs.ErrNotExist when
// there is none).
func (c *CertStorage) Load(ctx context.Context, key string) ([]byte, error) {
	var resp *clientv3.GetResponse
	err := c.call(ctx, func(ctx context.Context) (err error) {
		resp, err = c.store.cl.Get(ctx, c.dataKey(key))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: load %s from etcd: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("fleet: %s: %w", key, fs.ErrNotExist)
	}
	return resp.Kvs[0].Value, nil
}

// Delete deletes key and, when it is a directory, every key under it.
func (c *CertStorage) Delete(ctx context.Context, key string) error {
	err := c.call(ctx, func(ctx context.Context) error {
		_, err := c.store.cl.Txn(ctx).Then(
			clientv3.OpDelete(c.dataKey(key)), clientv3.OpDelete(c.metaKey(key)),
			clientv3.OpDelete(c.dataKey(key)+"/", clientv3.WithPrefix()), clientv3.OpDelete(c.metaKey(key)+"/", clientv3.WithPrefix()),
		).Commit()
		return err
	})
	if err != nil {
		return fmt.Errorf("fleet: delete %s from etcd: %w", key, err)
	}
	return nil
}

// Exists reports whether key is a value or a directory of values.
func (c *CertStorage) Exists(ctx context.Context, key string) bool {
	n := int64(0)
	err := c.call(ctx, func(ctx context.Context) error {
		resp, err := c.store.cl.Txn(ctx).Then(
			clientv3.OpGet(c.dataKey(key), clientv3.WithCountOnly()),
			clientv3.OpGet(c.dataKey(key)+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()),
		).Commit()
		if err == nil {
			for _, r := range resp.Responses {
				n += r.GetResponseRange().Count
			}
		}
		return err
	})
	return err == nil && n > 0
}

// List returns the keys under dir: its values and directories, and with
// recursive everything below them too (as certmagic's FileStorage walks a
// directory). An empty dir is an error wrapping fs.ErrNotExist.
func (c *CertStorage) List(ctx context.Context, dir string, recursive bool) ([]string, error) {
	var resp *clientv3.GetResponse
	prefix := c.dataKey(dir) + "/"
	if clean(dir) == "" {
		prefix = c.dataKey("")
	}
	err := c.call(ctx, func(ctx context.Context) (err error) {
		resp, err = c.store.cl.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: list %s in etcd: %w", dir, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("fleet: %s: %w", dir, fs.ErrNotExist)
	}
	base := clean(dir)
	join := func(rel string) string {
		if base == "" {
			return rel
		}
		return base + "/" + rel
	}
	var out []string
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		parts := strings.Split(strings.TrimPrefix(string(kv.Key), prefix), "/")
		n := 1
		if recursive {
			n = len(parts)
		}
		for i := 1; i <= n; i++ {
			k := join(strings.Join(parts[:i], "/"))
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// Stat describes key: a value (its size and modification time) or a
// directory (the newest modification under it).
func (c *CertStorage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	var resp *clientv3.TxnResponse
	err := c.call(ctx, func(ctx context.Context) (err error) {
		resp, err = c.store.cl.Txn(ctx).Then(
			clientv3.OpGet(c.metaKey(key)),
			clientv3.OpGet(c.metaKey(key)+"/", clientv3.WithPrefix()),
		).Commit()
		return err
	})
	if err != nil {
		return certmagic.KeyInfo{}, fmt.Errorf("fleet: stat %s in etcd: %w", key, err)
	}
	info := certmagic.KeyInfo{Key: key}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		var m certMeta
		if err := json.Unmarshal(kvs[0].Value, &m); err != nil {
			return info, fmt.Errorf("fleet: %s: unreadable metadata: %w", key, err)
		}
		info.Modified, info.Size, info.IsTerminal = m.Modified, m.Size, true
		return info, nil
	}
	kvs := resp.Responses[1].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return info, fmt.Errorf("fleet: %s: %w", key, fs.ErrNotExist)
	}
	for _, kv := range kvs {
		var m certMeta
		if json.Unmarshal(kv.Value, &m) == nil && m.Modified.After(info.Modified) {
			info.Modified = m.Modified
		}
	}
	return info, nil
}

// Lock takes the named lock, waiting while another holds it (or ctx
// ends).
func (c *CertStorage) Lock(ctx context.Context, name string) error {
	return c.lock(ctx, name, false)
}

// TryLock takes the named lock if no one holds it.
func (c *CertStorage) TryLock(ctx context.Context, name string) (bool, error) {
	err := c.lock(ctx, name, true)
	if errors.Is(err, concurrency.ErrLocked) {
		return false, nil
	}
	return err == nil, err
}

func (c *CertStorage) lock(ctx context.Context, name string, try bool) error {
	// The session is the lock's lease: its keepalive runs until Unlock
	// closes it, not with ctx (certmagic's may end while it holds the
	// lock).
	sess, err := concurrency.NewSession(c.store.cl, concurrency.WithTTL(int(max(c.lockTTL/time.Second, 1))))
	if err != nil {
		return fmt.Errorf("fleet: lock %s: lease: %w", name, err)
	}
	mu := concurrency.NewMutex(sess, c.lockKey(name))
	if try {
		err = mu.TryLock(ctx)
	} else {
		err = mu.Lock(ctx)
	}
	if err != nil {
		sess.Close()
		return fmt.Errorf("fleet: lock %s: %w", name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.locks[name]; old != nil {
		// Only one holder of a name per process: etcd's mutex is
		// reentrant on one session, not across two, so this cannot
		// happen unless the caller locked twice.
		sess.Close()
		return fmt.Errorf("fleet: lock %s: already held by this process", name)
	}
	c.locks[name] = &heldLock{sess: sess, mu: mu}
	return nil
}

// Unlock releases the named lock: it deletes the lock's key and revokes
// its lease.
func (c *CertStorage) Unlock(ctx context.Context, name string) error {
	c.mu.Lock()
	h := c.locks[name]
	delete(c.locks, name)
	c.mu.Unlock()
	if h == nil {
		return fmt.Errorf("fleet: unlock %s: not held", name)
	}
	uerr := c.call(ctx, h.mu.Unlock)
	// Closing the session revokes the lease, which removes the lock's
	// key even when the delete above failed.
	cerr := h.sess.Close()
	if err := errors.Join(uerr, cerr); err != nil {
		return fmt.Errorf("fleet: unlock %s: %w", name, err)
	}
	return nil
}
