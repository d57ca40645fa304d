package fleet_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
)

// endableWatcher forwards a real Watcher; End closes every open watch
// channel, as when etcd ends a watch (leader change with
// WithRequireLeader, a gRPC stream reset), while etcd itself is fine.
type endableWatcher struct {
	clientv3.Watcher
	mu   sync.Mutex
	ends []chan struct{}
}

func (w *endableWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	in := w.Watcher.Watch(ctx, key, opts...)
	out := make(chan clientv3.WatchResponse)
	end := make(chan struct{})
	w.mu.Lock()
	w.ends = append(w.ends, end)
	w.mu.Unlock()
	go func() {
		defer close(out)
		for {
			select {
			case <-end:
				return
			case r, ok := <-in:
				if !ok {
					return
				}
				select {
				case out <- r:
				case <-end:
					return
				}
			}
		}
	}()
	return out
}

func (w *endableWatcher) End() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.ends {
		close(e)
	}
	w.ends = nil
}

// A transient end of the demand watch (etcd healthy, instance alive and
// serving) must not revoke the instance's lease: its demand record stays
// and the other instances keep counting its rate while it reconnects.
// (Found in review: the session revoked on every exit.)
func TestDemandKeptOnTransientError(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	cl := dial(t, e)
	ew := &endableWatcher{Watcher: clientv3.NewWatcher(cl)}
	cl.Watcher = ew
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("in", "a")
	a, err := fleet.NewDemandShare(fleet.NewStore(cl, ""), fleet.DemandShareOptions{
		Instance: "a", Logger: log, LeaseTTL: 10 * time.Second,
		CheckInterval: 200 * time.Millisecond, CheckTimeout: checkTimeout,
		MinBackoff: 200 * time.Millisecond, MaxBackoff: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Run(ctx)
	b := startDemander(t, e, "b")
	a.Publish(time.Now(), time.Second, map[string]map[string]float64{"web-bs": {"europe-west1": 1500}}, nil)
	remoteIs(t, "seeing a's 1500", 1500, b)

	admin := dial(t, e)
	wch := admin.Watch(ctx, "/spillway/demand/a", clientv3.WithCreatedNotify())
	select { // the watch is in place before a's is ended
	case <-wch:
	case <-time.After(eventuallyBound):
		t.Fatalf("the test's own watch not created after %v", eventuallyBound)
	}
	ew.End() // etcd is fine, a is alive: only its watch ended
	ended := time.Now()
	var minRemote float64 = 1500
	deleted := time.Duration(0)
	deadline := time.After(2 * time.Second)
loop:
	for {
		select {
		case wr := <-wch:
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete && deleted == 0 {
					deleted = time.Since(ended)
				}
			}
		case <-time.After(time.Millisecond):
			minRemote = min(minRemote, b.remoteEU())
		case <-deadline:
			break loop
		}
	}
	t.Logf("a's record deleted %v after its watch ended (lease TTL 10 s); b's remote went as low as %v", deleted, minRemote)
	if deleted != 0 || minRemote < 1500 {
		t.Errorf("a transient watch end revoked a's lease: record deleted after %v, b's remote fell to %v rps (a still serves 1500)", deleted, minRemote)
	}
}

func startBareDemand(t *testing.T, e *fleettest.Etcd, name string, ttl, maxBackoff time.Duration) *fleet.DemandShare {
	cl := dial(t, e)
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("in", name)
	s, err := fleet.NewDemandShare(fleet.NewStore(cl, ""), fleet.DemandShareOptions{
		Instance: name, Logger: log, LeaseTTL: ttl,
		CheckInterval: 200 * time.Millisecond, CheckTimeout: checkTimeout,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: maxBackoff,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// etcd is down for a while; both instances keep serving and keep each
// other's rate. When etcd is back, the instance that reconnects first must
// keep counting the other, whose key expired meanwhile, until it has had
// the time to reconnect too (found in review: it was dropped at once, so
// the protection ended exactly when it was still needed).
func TestDemandRejoinKeepsPeerInBackoff(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	// --fleet-lease 2s (allowed by serve) and the default backoff, which
	// was up to 10 s, longer than the lease, and is now capped at a third
	// of it.
	a := startBareDemand(t, e, "a", 2*time.Second, 0)
	b := startBareDemand(t, e, "b", 2*time.Second, 0)
	rates := func(v float64) control.DemandRates { return control.DemandRates{"web-bs": {"europe-west1": v}} }
	a.Publish(time.Now(), time.Second, rates(1000), nil)
	b.Publish(time.Now(), time.Second, rates(1000), nil)
	eventually(t, "a sees b", func() (bool, string) { return a.Remote()["web-bs"]["europe-west1"] == 1000, "" })
	e.Stop()
	time.Sleep(4 * time.Second) // the backoffs grow
	e.Restart()
	back := time.Now()
	minA, dropAt := 1000.0, time.Duration(0)
	for time.Since(back) < 7*time.Second {
		a.Publish(time.Now(), time.Second, rates(1000), nil)
		b.Publish(time.Now(), time.Second, rates(1000), nil)
		if v := a.Remote()["web-bs"]["europe-west1"]; v < minA {
			minA = v
			if dropAt == 0 {
				dropAt = time.Since(back)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("after etcd came back, a's remote fell to %v at +%v (b served 1000 rps throughout); a %+v, b %+v", minA, dropAt, a.Stats(), b.Stats())
	if minA < 1000 {
		t.Errorf("a dropped b's rate (to %v) after etcd came back while b was still in backoff", minA)
	}
}

type deniedKV struct{ clientv3.KV }

func (k deniedKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if strings.Contains(key, "/demand/") {
		return nil, errors.New("etcdserver: permission denied")
	}
	return k.KV.Get(ctx, key, opts...)
}

// A DemandShare that never gets its first session (here: the demand/ prefix
// is not readable, e.g. an etcd role made before demand/ existed) says so
// in the log, with the fix, and in its stats (found in review: it retried
// silently, counting RATE against this instance's demand alone).
func TestDemandShareNeverConnectsLogs(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	cl := dial(t, e)
	cl.KV = deniedKV{cl.KV}
	var logs syncBuffer
	share, err := fleet.NewDemandShare(fleet.NewStore(cl, ""), fleet.DemandShareOptions{
		Instance: "a", Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	share.Run(ctx)
	t.Logf("stats %+v; log: %q", share.Stats(), logs.String())
	if logs.String() == "" {
		t.Errorf("2 s of failed demand sessions and not one log line")
	}
}
