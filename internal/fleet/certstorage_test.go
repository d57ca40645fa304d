package fleet_test

import (
	"context"
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
)

// TestCertStorage: certmagic's storage semantics on etcd, as its
// FileStorage has them: values, directories made of key prefixes, lists
// (one level and recursive), stat, and a delete that takes a directory's
// values with it; a missing key is fs.ErrNotExist.
func TestCertStorage(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	cs := fleet.NewCertStorage(fleet.NewStore(dial(t, e), ""), 0)
	ctx := ctxT(t)
	before := time.Now()
	for k, v := range map[string]string{
		"certificates/ca/www.test/www.test.crt": "CRT", "certificates/ca/www.test/www.test.key": "KEY",
		"certificates/ca/api.test/api.test.crt": "CRT2", "users/ops@test/ops.json": "{}", "last_clean.json": "[]",
	} {
		if err := cs.Store(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := cs.Load(ctx, "certificates/ca/www.test/www.test.key"); err != nil || string(v) != "KEY" {
		t.Errorf("Load = %q, %v; want KEY", v, err)
	}
	if _, err := cs.Load(ctx, "certificates/ca/none.crt"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing key: %v, want fs.ErrNotExist", err)
	}
	for _, tc := range []struct {
		dir       string
		recursive bool
		want      string
	}{
		{"certificates", false, "certificates/ca"},
		{"certificates/ca", false, "certificates/ca/api.test,certificates/ca/www.test"},
		{"certificates/ca/", true, "certificates/ca/api.test,certificates/ca/api.test/api.test.crt,certificates/ca/www.test,certificates/ca/www.test/www.test.crt,certificates/ca/www.test/www.test.key"},
		{"", false, "certificates,last_clean.json,users"},
	} {
		got, err := cs.List(ctx, tc.dir, tc.recursive)
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("List(%q, %v) = %v, %v; want %s", tc.dir, tc.recursive, got, err, tc.want)
		}
	}
	if _, err := cs.List(ctx, "ocsp", false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("List of a missing directory: %v, want fs.ErrNotExist", err)
	}
	for key, want := range map[string]bool{"certificates": true, "certificates/ca/www.test/www.test.crt": true, "certificates/c": false, "ocsp": false} {
		if got := cs.Exists(ctx, key); got != want {
			t.Errorf("Exists(%q) = %v, want %v", key, got, want)
		}
	}
	fi, err := cs.Stat(ctx, "certificates/ca/www.test/www.test.key")
	if err != nil || !fi.IsTerminal || fi.Size != 3 || fi.Modified.Before(before.Add(-time.Second)) {
		t.Errorf("Stat of a value = %+v, %v; want terminal, 3 bytes, modified now", fi, err)
	}
	di, err := cs.Stat(ctx, "users/ops@test")
	if err != nil || di.IsTerminal || di.Modified.IsZero() {
		t.Errorf("Stat of a directory = %+v, %v; want a directory with its newest time", di, err)
	}
	if _, err := cs.Stat(ctx, "nothing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat of a missing key: %v, want fs.ErrNotExist", err)
	}
	if err := cs.Delete(ctx, "certificates/ca/www.test"); err != nil {
		t.Fatal(err)
	}
	got, _ := cs.List(ctx, "certificates/ca", true)
	if want := []string{"certificates/ca/api.test", "certificates/ca/api.test/api.test.crt"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after deleting a directory, List = %v, want %v", got, want)
	}
	if err := cs.Delete(ctx, "never/stored"); err != nil {
		t.Errorf("Delete of a missing key: %v, want nil", err)
	}
}

// TestCertStorageLock: two instances' storages exclude each other on a
// lock name; Unlock hands it over at once, TryLock does not wait, and a
// holder that dies without unlocking (its etcd client closed: no
// keepalive, no revoke) loses the lock when its lease's TTL runs out.
func TestCertStorageLock(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	const ttl = 2 * time.Second
	a := fleet.NewCertStorage(fleet.NewStore(dial(t, e), ""), ttl)
	b := fleet.NewCertStorage(fleet.NewStore(dial(t, e), ""), ttl)
	ctx := ctxT(t)
	if err := a.Lock(ctx, "issue_cert_www.test"); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.TryLock(ctx, "issue_cert_www.test"); ok || err != nil {
		t.Fatalf("TryLock of a held lock = %v, %v; want false, nil", ok, err)
	}
	if ok, err := b.TryLock(ctx, "issue_cert_api.test"); !ok || err != nil {
		t.Fatalf("TryLock of another name = %v, %v; want true", ok, err)
	}
	var got atomic.Bool
	done := make(chan error, 1)
	go func() {
		err := b.Lock(ctx, "issue_cert_www.test")
		got.Store(true)
		done <- err
	}()
	time.Sleep(500 * time.Millisecond)
	if got.Load() {
		t.Fatal("b took a lock a holds")
	}
	start := time.Now()
	if err := a.Unlock(ctx, "issue_cert_www.test"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("lock handed over %v after Unlock", time.Since(start).Round(time.Millisecond))
	if err := b.Unlock(ctx, "issue_cert_www.test"); err != nil {
		t.Fatal(err)
	}

	// A holder that dies: its client closes without unlocking.
	dying := dial(t, e)
	d := fleet.NewCertStorage(fleet.NewStore(dying, ""), ttl)
	if err := d.Lock(ctx, "renew_cert_www.test"); err != nil {
		t.Fatal(err)
	}
	dying.Close()
	start = time.Now()
	lctx, cancel := context.WithTimeout(ctx, 10*ttl)
	defer cancel()
	if err := b.Lock(lctx, "renew_cert_www.test"); err != nil {
		t.Fatalf("lock of a dead holder never released: %v", err)
	}
	waited := time.Since(start)
	t.Logf("lock of a dead holder taken after %v (lease TTL %v)", waited.Round(time.Millisecond), ttl)
	if waited < ttl/2 {
		t.Errorf("lock of a dead holder taken after %v, before its lease (TTL %v) could expire", waited, ttl)
	}
}
