package embedded_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/embedded"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func freeURL(t *testing.T) *url.URL {
	t.Helper()
	u, err := embedded.FreeLoopbackURL()
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestThreeMembers: three members started from one initial cluster form
// it; a write through one is read through another; a client given one
// member learns the others' client URLs (AutoSync) and still answers
// when that member stops.
func TestThreeMembers(t *testing.T) {
	var peers []embedded.Peer
	var clients []*url.URL
	for _, n := range []string{"a", "b", "c"} {
		peers = append(peers, embedded.Peer{Name: n, URL: *freeURL(t)})
		clients = append(clients, freeURL(t))
	}
	dir := t.TempDir()
	var ms []*embedded.Member
	for i, p := range peers {
		m, err := embedded.Start(embedded.Options{Name: p.Name, Cluster: peers, ClientURL: clients[i], Dir: filepath.Join(dir, p.Name), Logger: fleettest.Logger(t)})
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
	cl, err := fleet.ClientConfig{Endpoints: []string{ms[0].ClientAddr()}, AutoSync: 100 * time.Millisecond}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	other, err := fleet.ClientConfig{Endpoints: []string{ms[2].ClientAddr()}}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if r, err := other.Get(ctx, "k"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("read through member c: %v, %v", r, err)
	}
	deadline := time.Now().Add(45 * time.Second) // generous: a loaded machine
	for len(cl.Endpoints()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("after 45 s, the client knows %v, want the three members' client URLs", cl.Endpoints())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range clients {
		if !slices.Contains(cl.Endpoints(), c.String()) && !slices.Contains(cl.Endpoints(), c.Host) {
			t.Errorf("the client's endpoints %v lack %s", cl.Endpoints(), c)
		}
	}
	ms[0].Close()
	var lastErr error
	for range 50 {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		_, lastErr = cl.Put(pctx, "k", "w")
		pcancel()
		if lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("with its member stopped, the client cannot write through the others: %v", lastErr)
	}
}

// TestParseCluster: the initial cluster's syntax and its errors.
func TestParseCluster(t *testing.T) {
	ps, err := embedded.ParseCluster("--x", " a=http://127.0.0.1:2380, b=http://10.0.0.6:2380/ ")
	if err != nil || len(ps) != 2 || ps[0].Name != "a" || ps[1].URL.String() != "http://10.0.0.6:2380" {
		t.Fatalf("%v, %v", ps, err)
	}
	for in, want := range map[string]string{
		"":                                  "no members",
		"a":                                 "is not NAME=http://HOST:PORT",
		"a=http://h:0":                      "numeric port 1-65535",
		"a=http://h:2380/x":                 "is not http://HOST:PORT",
		"a=https://h:2380":                  "plain HTTP only",
		"a=http://h:1,b=http://h:1":         "share the peer address",
		"a=http://h:1,a=http://h:2":         "named twice",
		"a/b=http://h:1":                    "is not NAME=http://HOST:PORT",
		"a=http://u@h:1":                    "is not http://HOST:PORT",
		fmt.Sprintf("a=http://h:%d", 1<<16): "numeric port 1-65535",
	} {
		_, err := embedded.ParseCluster("--x", in)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--x") || !strings.Contains(err.Error(), "fix") {
			t.Errorf("%q: %v, want an error with %q, the flag and a fix", in, err, want)
		}
	}
}

// TestUnspecifiedHost: a member URL on 0.0.0.0 or :: is refused with the
// fix: etcd advertises the client and peer URLs as given, so the other
// members (and, through the member list, the other instances) would be
// handed an address that is not this member's.
func TestUnspecifiedHost(t *testing.T) {
	for _, raw := range []string{"http://0.0.0.0:2379", "http://[::]:2379"} {
		_, err := embedded.ParseURL("--fleet-embedded-client", raw)
		if err == nil || !strings.Contains(err.Error(), "--fleet-embedded-client") || !strings.Contains(err.Error(), "unspecified host") || !strings.Contains(err.Error(), "fix") {
			t.Errorf("ParseURL(%s): %v; want the unspecified host refused with the fix", raw, err)
		}
	}
	if _, err := embedded.ParseCluster("--fleet-embedded", "a=http://127.0.0.1:2380,b=http://0.0.0.0:2382"); err == nil || !strings.Contains(err.Error(), "unspecified host") {
		t.Errorf("ParseCluster with b on 0.0.0.0: %v; want it refused", err)
	}
	if _, err := embedded.ParseURL("--fleet-embedded-client", "http://127.0.0.1:2379"); err != nil {
		t.Errorf("loopback: %v", err)
	}
}

// TestStoppedByClose: Stopped is closed by Close too, and Err stays nil
// then (only a member that stops on its own has an error; that case is
// TestServeFleetEmbeddedMemberStops in internal/cli).
func TestStoppedByClose(t *testing.T) {
	m, err := embedded.StartSingle(context.Background(), "a", filepath.Join(t.TempDir(), "a"), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Stopped():
		t.Fatalf("stopped while running: %v", m.Err())
	default:
	}
	m.Close()
	select {
	case <-m.Stopped():
	case <-time.After(10 * time.Second):
		t.Fatal("Stopped not closed 10 s after Close")
	}
	if err := m.Err(); err != nil {
		t.Errorf("Err after Close: %v; want nil", err)
	}
}

// TestLoggerQuietOnClose: etcd's log goes to Options.Logger, and closing
// the member on purpose logs no error (etcd logs each listener it closes
// as "setting up serving from embedded etcd failed", three per member,
// which flooded the test output), while what etcd logs as it runs still
// arrives.
func TestLoggerQuietOnClose(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	peer, client := freeURL(t), freeURL(t)
	m, err := embedded.Start(embedded.Options{Name: "a", Cluster: []embedded.Peer{{Name: "a", URL: *peer}}, ClientURL: client, Dir: filepath.Join(t.TempDir(), "a"), Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.Ready(ctx); err != nil {
		m.Close()
		t.Fatal(err)
	}
	if logs.Len() == 0 {
		t.Error("etcd logged nothing to Options.Logger while starting; want its info lines there")
	}
	m.Close()
	for _, e := range logs.FilterLevelExact(zapcore.ErrorLevel).All() {
		t.Errorf("closing the member logged an error: %s %v", e.Message, e.ContextMap())
	}
}
