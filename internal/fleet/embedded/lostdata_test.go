package embedded_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/embedded"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
)

// TestLostDataDir: a member whose data directory was lost (the default
// $TMPDIR/spillway-etcd-NAME after a reboot that clears /tmp) and that
// restarts with the same name and initial cluster is refused with an
// error naming the lost data and the real fix; after etcdctl's member
// remove and member add, it rejoins when started with ClusterState
// "existing". (Adapted from a reviewer's reproduction.)
func TestLostDataDir(t *testing.T) {
	var peers []embedded.Peer
	var clients []*url.URL
	for _, n := range []string{"a", "b", "c"} {
		peers = append(peers, embedded.Peer{Name: n, URL: *freeURL(t)})
		clients = append(clients, freeURL(t))
	}
	dir := t.TempDir()
	start := func(i int, state string) (*embedded.Member, error) {
		return embedded.Start(embedded.Options{Name: peers[i].Name, Cluster: peers, ClientURL: clients[i], Dir: filepath.Join(dir, peers[i].Name), Logger: fleettest.Logger(t), ClusterState: state})
	}
	var ms []*embedded.Member
	for i := range peers {
		m, err := start(i, "")
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ms = append(ms, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, m := range ms {
		if err := m.Ready(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := fleet.ClientConfig{Endpoints: []string{ms[0].ClientAddr()}}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	ms[2].Close()
	os.RemoveAll(filepath.Join(dir, "c"))

	// The next boot, as before: the cluster knows c already.
	if m2, err := start(2, ""); err != nil {
		t.Logf("restart on an empty data directory: %v", err)
		for _, want := range []string{"lost its data directory", "member remove", "member add", "--fleet-embedded-state existing"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error does not say %q: %v", want, err)
			}
		}
		if strings.Contains(err.Error(), "free the ports") {
			t.Errorf("the error still blames the ports: %v", err)
		}
	} else {
		m2.Close()
		t.Fatal("a member with a lost data directory started as new")
	}

	// The remedy: member remove, member add, start as "existing".
	ml, err := cl.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, mm := range ml.Members {
		if mm.Name == "c" {
			if _, err := cl.MemberRemove(ctx, mm.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	// etcd refuses to add a member until the cluster has been healthy
	// for a while ("unhealthy cluster"): retry until ctx ends.
	for {
		_, err := cl.MemberAdd(ctx, []string{peers[2].URL.String()})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	os.RemoveAll(filepath.Join(dir, "c"))
	m, err := start(2, "existing")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	if err := m.Ready(rctx); err != nil {
		t.Fatalf("c does not rejoin after member remove/add as existing: %v", err)
	}
	c2, err := fleet.ClientConfig{Endpoints: []string{m.ClientAddr()}}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	r, err := c2.Get(rctx, "k")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("c after rejoining: get k = %v, %v; want v", r, err)
	}
}
