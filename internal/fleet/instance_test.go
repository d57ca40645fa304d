package fleet_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
	"github.com/spillwaylb/spillway/internal/serve"
)

// fullInstance is one instance as `spillway serve --fleet` runs it:
// fleet.NewInstance with every component (agent, probe share, demand
// share, rate limit share, control loop) next to a real server.
type fullInstance struct {
	name string
	srv  *serve.Server
	inst *fleet.Instance
	stop func()
}

// startFullInstance starts one; ws, if given, is the Watcher of its
// etcd client (a fault injector).
func startFullInstance(t *testing.T, e *fleettest.Etcd, name string, ws ...clientv3.Watcher) *fullInstance {
	t.Helper()
	return startFullInstanceOpts(t, e, name, nil, ws...)
}

// startFullInstanceOpts is startFullInstance with tweak applied to the
// server's options (its overlay store is the instance's).
func startFullInstanceOpts(t *testing.T, e *fleettest.Etcd, name string, tweak func(*serve.Options), ws ...clientv3.Watcher) *fullInstance {
	t.Helper()
	return startFullInstanceWith(t, e, name, instanceTweaks{opts: tweak}, ws...)
}

// instanceTweaks change what startFullInstanceWith starts: the config the
// fleet gave (before the server is made from it), the fleet options
// (region us-east1, one prober per target, shared demand and rate
// limits; the server takes their role and region) and the server's
// options.
type instanceTweaks struct {
	cfg  func(*config.Config)
	inst func(*fleet.InstanceOptions)
	opts func(*serve.Options)
}

func startFullInstanceWith(t *testing.T, e *fleettest.Etcd, name string, tw instanceTweaks, ws ...clientv3.Watcher) *fullInstance {
	t.Helper()
	cl := dial(t, e)
	if len(ws) > 0 {
		cl.Watcher = ws[0]
	}
	st := fleet.NewStore(cl, "")
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("in", name)
	cfg, status, err := fleet.Start(context.Background(), st, "", 2*time.Second, log)
	if err != nil {
		t.Fatal(err)
	}
	if tw.cfg != nil {
		tw.cfg(cfg)
	}
	io := fleet.InstanceOptions{
		Instance: name, Region: "us-east1", Probers: 1, Rate: true, RateLimits: true, Logger: log,
		LeaseTTL: 2 * time.Second, CheckInterval: 200 * time.Millisecond, CheckTimeout: checkTimeout,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
	}
	if tw.inst != nil {
		tw.inst(&io)
	}
	inst, err := fleet.NewInstance(st, io)
	if err != nil {
		t.Fatal(err)
	}
	opts := serve.Options{Admin: "127.0.0.1:0", Logger: log, WatchInterval: -1, Role: io.Role, Region: io.Region}
	if sh := inst.Share(); sh != nil {
		opts.ProbeShare = sh
	}
	if d := inst.Demand(); d != nil {
		opts.DemandShare = d
	}
	if rl := inst.RateLimits(); rl != nil {
		opts.RateLimitShare = rl
	}
	opts.OverlayStore = inst.Overlay()
	opts.CacheInvalidations = inst.Cache()
	if tw.opts != nil {
		tw.opts(&opts)
	}
	srv, err := serve.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srvDone, instDone := make(chan error, 1), make(chan error, 1)
	go func() { srvDone <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case <-time.After(eventuallyBound):
		cancel()
		t.Fatalf("server not ready after %v", eventuallyBound)
	}
	go func() { instDone <- inst.Run(ctx, srv, status) }()
	in := &fullInstance{name: name, srv: srv, inst: inst}
	stopped := false
	in.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		for _, c := range []chan error{instDone, srvDone} {
			if err := <-c; err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(in.stop)
	return in
}

// fleetKeys returns, per instance, the leases of the keys it holds in
// etcd: its registration and config report, its verdicts, its demand
// record, its election key and (the leader) control/leader.
func fleetKeys(t *testing.T, cl *clientv3.Client) map[string]map[string]clientv3.LeaseID {
	t.Helper()
	resp, err := cl.Get(ctxT(t), "/spillway/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]clientv3.LeaseID{}
	for _, kv := range resp.Kvs {
		k := strings.TrimPrefix(string(kv.Key), "/spillway/")
		owner := ""
		switch {
		case strings.HasPrefix(k, "instances/"):
			owner = strings.Split(strings.TrimPrefix(k, "instances/"), "/")[0]
		case strings.HasPrefix(k, "health/"):
			owner = k[strings.LastIndexByte(k, '/')+1:]
		case strings.HasPrefix(k, "demand/"):
			owner = strings.TrimPrefix(k, "demand/")
		case strings.HasPrefix(k, "ratelimits/"):
			owner = strings.TrimPrefix(k, "ratelimits/")
		case strings.HasPrefix(k, "summary/"):
			owner = strings.TrimPrefix(k, "summary/")
		case strings.HasPrefix(k, "control/election/"), k == "control/leader":
			owner = string(kv.Value)
		default:
			continue // the config and control/drain live without a lease
		}
		if out[owner] == nil {
			out[owner] = map[string]clientv3.LeaseID{}
		}
		out[owner][k] = clientv3.LeaseID(kv.Lease)
	}
	return out
}

// TestInstanceOneSession: an instance running every component holds one
// lease in etcd, and every key it writes (registration, config report,
// verdicts, demand, election, leader, fleet view summary) lives under it; a clean stop
// revokes it, so all of them leave at once and the other instance leads.
// (Before the shared session each component granted its own: 4 leases
// per instance.)
func TestInstanceOneSession(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	cl := dial(t, e)
	st := fleet.NewStore(cl, "")
	bs := []*hcBackend{newHCBackend(t, "127.0.0.30"), newHCBackend(t, "127.0.0.31")}
	push(t, st, shardedConfig(bs))
	a, b := startFullInstance(t, e, "a"), startFullInstance(t, e, "b")

	// Every component of both has written its keys: 2 registrations and
	// reports, 2 verdicts (one prober per target), 2 demand records, 2
	// candidates and a leader.
	eventually(t, "every component's keys in etcd", func() (bool, string) {
		keys := fleetKeys(t, cl)
		for _, n := range []string{"a", "b"} {
			var kinds []string
			for k := range keys[n] {
				kinds = append(kinds, strings.SplitN(k, "/", 2)[0])
			}
			for _, want := range []string{"instances", "demand", "control", "summary"} {
				if !slices.Contains(kinds, want) {
					return false, fmt.Sprint(keys)
				}
			}
		}
		verdicts := 0
		for _, ks := range keys {
			for k := range ks {
				if strings.HasPrefix(k, "health/") {
					verdicts++
				}
			}
		}
		return verdicts == 2 && a.inst.Loop().Stats().Leader != "", fmt.Sprint(keys)
	})
	leases, err := cl.Leases(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leases in etcd for 2 instances with every component: %d", len(leases.Leases))
	if len(leases.Leases) != 2 {
		t.Errorf("%d leases for 2 instances, want one per instance", len(leases.Leases))
	}
	keys := fleetKeys(t, cl)
	for n, ks := range keys {
		var ids []clientv3.LeaseID
		for _, id := range ks {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		if len(ids) != 1 || ids[0] == clientv3.NoLease {
			t.Errorf("instance %s's keys are under leases %v, want one: %v", n, ids, ks)
		}
	}

	leader, other := a, b
	if a.inst.Loop().Stats().Leader == "b" {
		leader, other = b, a
	}
	leader.stop()
	// A clean stop revokes the session's lease before Run returns: the
	// leader's keys are gone now, not after the TTL.
	if ks := fleetKeys(t, cl)[leader.name]; len(ks) != 0 {
		t.Errorf("keys of the stopped %s still in etcd: %v", leader.name, ks)
	}
	eventually(t, other.name+" leads", func() (bool, string) {
		st := other.inst.Loop().Stats()
		return st.Leading, fmt.Sprintf("%+v", st)
	})
}

// TestInstanceMemberFailureKeepsSession: when the components of an
// instance fail while etcd is fine (here every watch of its client ends
// at once: a gRPC stream reset), each reconnects on the instance's lease:
// no new lease is granted, none is revoked, its keys stay under the same
// lease throughout, and the fleet keeps one leader.
func TestInstanceMemberFailureKeepsSession(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	cl := dial(t, e)
	st := fleet.NewStore(cl, "")
	bs := []*hcBackend{newHCBackend(t, "127.0.0.32"), newHCBackend(t, "127.0.0.33")}
	push(t, st, shardedConfig(bs))
	wa := &endableWatcher{Watcher: clientv3.NewWatcher(dial(t, e))}
	a, b := startFullInstance(t, e, "a", wa), startFullInstance(t, e, "b")
	// lease is the one lease all of a's keys live under (0: several, or
	// its registration or demand record missing).
	lease := func() (clientv3.LeaseID, string) {
		keys := fleetKeys(t, cl)["a"]
		id := keys["instances/a"]
		if _, ok := keys["demand/a"]; !ok {
			return 0, fmt.Sprint(keys)
		}
		for _, l := range keys {
			if l != id {
				return 0, fmt.Sprint(keys)
			}
		}
		return id, fmt.Sprint(keys)
	}
	var before clientv3.LeaseID
	eventually(t, "a's keys under one lease, a leader elected", func() (bool, string) {
		var got string
		before, got = lease()
		return before != 0 && a.inst.Loop().Stats().Leader != "" && a.inst.Share().Stats().Connected, got
	})

	wa.End()
	// Each component notices, goes down and comes back up on the lease.
	eventually(t, "a's components up again", func() (bool, string) {
		ls, sh := a.inst.Loop().Stats(), a.inst.Share().Stats()
		return ls.Connected && sh.Connected && ls.Leader != "", fmt.Sprintf("%+v %+v", ls, sh)
	})
	eventually(t, "a's keys back under the lease it had", func() (bool, string) {
		id, got := lease()
		return id == before, got
	})
	leases, err := cl.Leases(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Leases) != 2 {
		t.Errorf("%d leases after a's components reconnected, want still one per instance: %v", len(leases.Leases), leases.Leases)
	}
	eventually(t, "one leader", func() (bool, string) {
		la, lb := a.inst.Loop().Stats(), b.inst.Loop().Stats()
		return la.Leading != lb.Leading && la.Leader == lb.Leader, fmt.Sprintf("a %+v, b %+v", la, lb)
	})
}
