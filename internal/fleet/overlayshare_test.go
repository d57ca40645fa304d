package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
	"github.com/spillwaylb/spillway/internal/overlay"
	"github.com/spillwaylb/spillway/internal/serve"
)

// TestFleetOverlay: a drain set on one instance applies on the other
// through etcd (its health view loses the endpoint, its proxy stops
// sending to it), and ends on both at its expiry, each by its own
// injected clock.
func TestFleetOverlay(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	st := fleet.NewStore(dial(t, e), "")
	bs := []*hcBackend{newHCBackend(t, "127.0.0.32"), newHCBackend(t, "127.0.0.33")}
	push(t, st, shardedConfig(bs))
	var skew atomic.Int64
	clock := func(o *serve.Options) {
		o.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		o.OverlayCheckInterval = 50 * time.Millisecond
	}
	a, b := startFullInstanceOpts(t, e, "a", clock), startFullInstanceOpts(t, e, "b", clock)
	members := func(in *fullInstance) int {
		h := in.srv.Health()
		if h == nil || len(h.Services) == 0 || len(h.Services[0].Backends) == 0 {
			return -1
		}
		return h.Services[0].Backends[0].Members
	}
	eventually(t, "both instances on the pushed config", func() (bool, string) {
		return members(a) == 2 && members(b) == 2, fmt.Sprint(members(a), members(b))
	})

	req := serve.OverlayRequest{Op: "drain", For: "10m", Actor: "carol", Reason: "fleet test"}
	req.Group, req.Endpoint = "neg", bs[1].addr
	if err := a.srv.ChangeOverlay(context.Background(), req, "test"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b applies a's drain from etcd", func() (bool, string) {
		ov := b.srv.Overlay()
		return members(b) == 1 && ov != nil && len(ov.Entries) == 1 && ov.Entries[0].Actor == "carol", fmt.Sprintf("members %d overlay %+v", members(b), ov)
	})
	before := bs[1].requests.Load()
	cl := &http.Client{Timeout: 5 * time.Second}
	for range 40 {
		resp, err := cl.Get("http://" + b.srv.FrontendAddr("fe") + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := bs[1].requests.Load() - before; n != 0 {
		t.Errorf("the drained endpoint got %d of 40 requests through b", n)
	}

	skew.Store(int64(11 * time.Minute))
	eventually(t, "the drain expired on both", func() (bool, string) {
		return members(a) == 2 && members(b) == 2 && a.srv.Overlay() == nil && b.srv.Overlay() == nil,
			fmt.Sprint(members(a), members(b))
	})
	// The next write drops the expired entry from etcd.
	req = serve.OverlayRequest{Op: "set", CapacityScaler: new(0.5), Actor: "carol"}
	req.Service = "bs"
	if err := b.srv.ChangeOverlay(context.Background(), req, "test"); err != nil {
		t.Fatal(err)
	}
	resp, err := dial(t, e).Get(ctxT(t), "/spillway/overlay")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read the overlay key: %v", err)
	}
	var set overlay.Set
	if err := json.Unmarshal(resp.Kvs[0].Value, &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Entries) != 1 || set.Entries[0].Action != overlay.CapacityScaler {
		t.Errorf("etcd's overlay after a write = %+v, want the expired drain dropped", set.Entries)
	}
	eventually(t, "a applies b's capacity scaler", func() (bool, string) {
		ov := a.srv.Overlay()
		return ov != nil && len(ov.Entries) == 1, fmt.Sprintf("%+v", ov)
	})
}
