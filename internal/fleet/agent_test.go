package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

// backend answers every request with its name.
func backend(t *testing.T, name string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, name)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// instance is one in-process fleet instance: a real serve.Server and its
// agent, each with a client of its own.
type instance struct {
	name string
	srv  *serve.Server
}

// startInstance starts a fleet instance the way spillway serve --fleet
// does (fleet.Start, serve.New, Agent.Run), with fast checks.
func startInstance(t *testing.T, e *fleettest.Etcd, name, fallback string) *instance {
	t.Helper()
	cl := dial(t, e)
	st := fleet.NewStore(cl, "")
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg, status, err := fleet.Start(context.Background(), st, fallback, 2*time.Second, log)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(cfg, serve.Options{Admin: "127.0.0.1:0", Logger: log, WatchInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := fleet.NewAgent(st, srv, fleet.AgentOptions{
		Instance: name, Region: "us-east1", Initial: status, Logger: log,
		CheckInterval: 200 * time.Millisecond, CheckTimeout: checkTimeout,
		LeaseTTL: 2 * time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- srv.Run(ctx) }()
	go func() { done <- ag.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	})
	select {
	case <-srv.Ready():
	case <-time.After(eventuallyBound):
		t.Fatalf("server not ready after %v", eventuallyBound)
	}
	return &instance{name: name, srv: srv}
}

// tWriter sends the instances' logs to the test log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// get fetches path from the instance's frontend ("" and the error when
// it fails).
func (in *instance) get(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + in.srv.FrontendAddr("fe") + "/")
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// admin fetches an admin path.
func (in *instance) admin(t *testing.T, path string) string {
	t.Helper()
	return adminGet(t, in.srv, path)
}

// fleetHealth is the fleet part of /health.
func (in *instance) fleetHealth(t *testing.T) control.FleetStatus {
	t.Helper()
	var r report.Health
	if err := json.Unmarshal([]byte(in.admin(t, "/health")), &r); err != nil {
		t.Fatal(err)
	}
	if r.Fleet == nil {
		t.Fatalf("%s: /health has no fleet status", in.name)
	}
	return *r.Fleet
}

// eventually polls cond every 50 ms for up to eventuallyBound. The bound
// only decides how long a failing test takes: generous, so that a loaded
// 2-core machine (CI, or go test ./... beside other work) does not fail
// a test that would pass (a rate test needed more than 15 s once).
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(eventuallyBound)
	for {
		ok, got := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, still not %s; last: %s", eventuallyBound, what, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eventuallyBound bounds eventually's wait.
const eventuallyBound = 45 * time.Second

// checkTimeout bounds the test instances' etcd calls (checks, writes,
// lease grants): 2 s rather than a tighter 500 ms, because on a loaded
// 2-core machine running several tests' etcds an answer can take longer,
// and a timed-out check drops the instance's session, which then
// rewrites its keys (the write-counting tests failed that way).
const checkTimeout = 2 * time.Second

// servesFrom waits until every instance answers from backend body at
// fleet revision rev.
func servesFrom(t *testing.T, rev int64, body string, ins ...*instance) {
	t.Helper()
	for _, in := range ins {
		eventually(t, fmt.Sprintf("%s serving %q at revision %d", in.name, body, rev), func() (bool, string) {
			got, st := in.get(t), in.srv.FleetStatus()
			return got == body && st.Revision == rev, fmt.Sprintf("body %q, status %+v", got, *st)
		})
	}
}

func push(t *testing.T, st *fleet.Store, yaml string) *fleet.Record {
	t.Helper()
	r, err := st.Push(ctxT(t), []byte(yaml), fleet.PushMeta{Author: "test", Source: "fleet.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFleetFollowsPushes: two instances follow pushes; a config that
// fails on the instances (valid for push, but its certificate file does
// not exist on this host; then one written around push's validation)
// leaves both on the last good one, reported per instance; a rollback is
// applied like a push.
func TestFleetFollowsPushes(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	st := fleet.NewStore(dial(t, e), "")
	a, b, c := backend(t, "A"), backend(t, "B"), backend(t, "C")
	r1 := push(t, st, configYAML(a, httpFrontend))

	in1, in2 := startInstance(t, e, "i1", ""), startInstance(t, e, "i2", "")
	servesFrom(t, r1.Revision, "A", in1, in2)

	r2 := push(t, st, configYAML(b, httpFrontend))
	servesFrom(t, r2.Revision, "B", in1, in2)

	// Valid for push, fails on the instances: the certificate is not there.
	missing := t.TempDir() + "/absent.pem"
	https := fmt.Sprintf(`{name: fe, address: "127.0.0.1:0", protocol: HTTPS, urlMap: um, certificates: [{certificateFile: %q, privateKeyFile: %q}]}`, missing, missing)
	r3 := push(t, st, configYAML(c, https))
	waitRejected(t, st, r3.Revision, r2.Revision, "absent.pem", in1, in2)

	// Written around push's validation: not even a config.
	bad := &fleet.Record{Revision: r3.Revision + 1, Author: "test", Source: "bad.yaml", Config: "backendServices: [{name: bs, backends: [{group: nowhere}]}]\n"}
	raw, _ := json.Marshal(bad)
	if _, err := dial(t, e).Put(ctxT(t), st.CurrentKey(), string(raw)); err != nil {
		t.Fatal(err)
	}
	waitRejected(t, st, bad.Revision, r2.Revision, "nowhere", in1, in2)

	// A good push after the bad ones is applied again.
	r5 := push(t, st, configYAML(c, httpFrontend))
	servesFrom(t, r5.Revision, "C", in1, in2)
	eventuallyReports(t, st, func(rs []fleet.InstanceReport) bool {
		return len(rs) == 2 && rs[0].Revision == r5.Revision && rs[1].Revision == r5.Revision && rs[0].Status == "applied"
	})

	// Rollback to revision 1: a new revision with backend A again.
	r6, err := st.Rollback(ctxT(t), r1.Revision, fleet.PushMeta{Author: "test"})
	if err != nil {
		t.Fatal(err)
	}
	servesFrom(t, r6.Revision, "A", in1, in2)
}

// waitRejected waits until every instance reports rev rejected (the error
// mentioning want) while it still serves kept, in its status, in /health
// and in etcd.
func waitRejected(t *testing.T, st *fleet.Store, rev, kept int64, want string, ins ...*instance) {
	t.Helper()
	for _, in := range ins {
		eventually(t, fmt.Sprintf("%s rejecting revision %d", in.name, rev), func() (bool, string) {
			f := in.srv.FleetStatus()
			return f.RejectedRevision == rev && f.Revision == kept && strings.Contains(f.RejectedError, want), fmt.Sprintf("%+v", *f)
		})
		if h := in.fleetHealth(t); h.RejectedRevision != rev || h.Revision != kept {
			t.Fatalf("%s /health fleet = %+v, want revision %d in force and %d rejected", in.name, h, kept, rev)
		}
		if got := in.get(t); got != "B" {
			t.Fatalf("%s serves %q after rejecting revision %d, want the last good config's backend B", in.name, got, rev)
		}
	}
	eventuallyReports(t, st, func(rs []fleet.InstanceReport) bool {
		if len(rs) != len(ins) {
			return false
		}
		for _, r := range rs {
			if r.Status != "rejected" || r.RejectedRevision != rev || r.Revision != kept || !strings.Contains(r.Error, want) {
				return false
			}
		}
		return true
	})
}

func eventuallyReports(t *testing.T, st *fleet.Store, ok func([]fleet.InstanceReport) bool) {
	t.Helper()
	eventually(t, "the instances' reports in etcd as expected", func() (bool, string) {
		rs, err := st.Instances(ctxT(t))
		if err != nil {
			return false, err.Error()
		}
		return ok(rs), fmt.Sprintf("%+v", rs)
	})
}

// TestFleetStaleAndRejoin: an instance cut from etcd keeps serving, says
// it is stale in /health and /metrics, and picks up a config pushed after
// etcd is back, without a restart.
func TestFleetStaleAndRejoin(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	st := fleet.NewStore(dial(t, e), "")
	a, b := backend(t, "A"), backend(t, "B")
	r1 := push(t, st, configYAML(a, httpFrontend))
	in := startInstance(t, e, "i1", "")
	servesFrom(t, r1.Revision, "A", in)
	if m := in.admin(t, "/metrics"); !strings.Contains(m, "spillway_fleet_stale 0") || !strings.Contains(m, "spillway_fleet_config_revision 1") {
		t.Fatalf("/metrics before the outage lacks spillway_fleet_stale 0 and spillway_fleet_config_revision 1:\n%s", grepFleet(m))
	}

	start := time.Now()
	e.Stop()
	eventually(t, "stale in /health", func() (bool, string) {
		h := in.fleetHealth(t)
		return h.Stale && h.StaleWhy != "" && !h.StaleSince.IsZero(), fmt.Sprintf("%+v", h)
	})
	t.Logf("stale %s after etcd began to stop", time.Since(start).Round(time.Millisecond))
	if m := in.admin(t, "/metrics"); !strings.Contains(m, "spillway_fleet_stale 1") {
		t.Fatalf("/metrics while etcd is down lacks spillway_fleet_stale 1:\n%s", grepFleet(m))
	}
	// Still serving its last config, for a while.
	for range 5 {
		if got := in.get(t); got != "A" {
			t.Fatalf("while etcd is down the instance serves %q, want A", got)
		}
		time.Sleep(100 * time.Millisecond)
	}

	e.Restart()
	st2 := fleet.NewStore(dial(t, e), "")
	r2 := push(t, st2, configYAML(b, httpFrontend))
	servesFrom(t, r2.Revision, "B", in)
	eventually(t, "fresh again", func() (bool, string) {
		h := in.fleetHealth(t)
		return !h.Stale, fmt.Sprintf("%+v", h)
	})
	if m := in.admin(t, "/metrics"); !strings.Contains(m, "spillway_fleet_stale 0") || !strings.Contains(m, "spillway_fleet_config_revision 2") {
		t.Fatalf("/metrics after the outage:\n%s", grepFleet(m))
	}
}

func grepFleet(m string) string {
	var out []string
	for _, l := range strings.Split(m, "\n") {
		if strings.Contains(l, "spillway_fleet") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestStartFallback: with no reachable etcd, an instance starts from
// --config FILE (stale) or fails with an error naming the fix; with an
// empty fleet, it starts from the file.
func TestStartFallback(t *testing.T) {
	t.Parallel()
	dead := fleet.NewStore(mustDial(t, freeLoopback(t)), "")
	log := slog.New(slog.DiscardHandler)
	_, _, err := fleet.Start(context.Background(), dead, "", 300*time.Millisecond, log)
	if err == nil || !strings.Contains(err.Error(), "cannot reach etcd") || !strings.Contains(err.Error(), "--config FILE") {
		t.Fatalf("no etcd, no file: err = %v", err)
	}
	file := t.TempDir() + "/spillway.yaml"
	writeFile(t, file, configYAML(backend(t, "A"), httpFrontend))
	cfg, st, err := fleet.Start(context.Background(), dead, file, 300*time.Millisecond, log)
	if err != nil || cfg == nil || !st.Stale || st.Revision != 0 {
		t.Fatalf("no etcd, a file: cfg %v, status %+v, err %v; want the file's config, stale", cfg != nil, st, err)
	}

	e := fleettest.Start(t)
	empty := fleet.NewStore(dial(t, e), "")
	if _, _, err := fleet.Start(context.Background(), empty, "", 2*time.Second, log); err == nil || !strings.Contains(err.Error(), "config push") {
		t.Fatalf("empty fleet, no file: err = %v", err)
	}
	cfg, st, err = fleet.Start(context.Background(), empty, file, 2*time.Second, log)
	if err != nil || cfg == nil || st.Stale || st.Revision != 0 {
		t.Fatalf("empty fleet, a file: status %+v, err %v", st, err)
	}
}

func mustDial(t *testing.T, addr string) *clientv3.Client {
	cl, err := fleet.ClientConfig{Endpoints: []string{addr}, DialTimeout: time.Second}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// sinkTarget is an Agent target that applies nothing and records nothing.
type sinkTarget struct{}

func (sinkTarget) Reload(context.Context, *config.Config) error { return nil }
func (sinkTarget) SetFleetStatus(control.FleetStatus)           {}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestAgentNameInUse: a second instance given a live instance's name says
// so in its log, with the fix; the first one does not.
func TestAgentNameInUse(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	run := func(name string, cl *clientv3.Client) (*syncBuffer, func()) {
		buf := &syncBuffer{}
		ag, err := fleet.NewAgent(fleet.NewStore(cl, ""), sinkTarget{}, fleet.AgentOptions{
			Instance: name, Logger: slog.New(slog.NewTextHandler(buf, nil)),
			CheckInterval: 100 * time.Millisecond, CheckTimeout: checkTimeout,
			LeaseTTL: 2 * time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); ag.Run(ctx) }()
		stop := func() { cancel(); <-done }
		t.Cleanup(stop)
		return buf, stop
	}
	const inUse = "another instance is registered under this instance's name"
	cl := dial(t, e)
	first, _ := run("lb-a", cl)
	eventually(t, "lb-a registered", func() (bool, string) {
		resp, err := cl.Get(ctxT(t), fleet.DefaultPrefix+"instances/lb-a")
		return err == nil && len(resp.Kvs) == 1, fmt.Sprint(resp, err)
	})
	second, stopSecond := run("lb-a", cl)
	eventually(t, "the second lb-a warns", func() (bool, string) {
		return strings.Contains(second.String(), inUse) && strings.Contains(second.String(), "--instance"), second.String()
	})
	stopSecond()
	if strings.Contains(first.String(), inUse) {
		t.Errorf("the first lb-a warned about its own name:\n%s", first.String())
	}
}
