package fleet_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
)

// configYAML is a valid config whose one service sends everything to
// backend (host:port), with an HTTP frontend on a port of its own; extra
// goes at the top level.
func configYAML(backend, frontend string) string {
	host, port, _ := net.SplitHostPort(backend)
	return fmt.Sprintf(`networkEndpointGroups:
- name: neg
  zone: us-east1-b
  endpoints:
  - {ipAddress: %s, port: %s}
backendServices:
- name: bs
  backends:
  - {group: neg, balancingMode: RATE, maxRatePerEndpoint: 100000}
urlMaps:
- name: um
  defaultService: bs
frontends:
- %s
`, host, port, frontend)
}

const httpFrontend = `{name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}`

func dial(t *testing.T, e *fleettest.Etcd) *clientv3.Client {
	t.Helper()
	cl, err := fleet.ClientConfig{Endpoints: []string{e.ClientAddr}, DialTimeout: 2 * time.Second}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestStorePushHistoryRollback(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	st := fleet.NewStore(dial(t, e), "/test/")
	ctx := ctxT(t)

	if _, _, err := st.Current(ctx); err != fleet.ErrNoConfig {
		t.Fatalf("empty store: Current = %v, want ErrNoConfig", err)
	}
	a := configYAML("127.0.0.1:9001", httpFrontend)
	b := configYAML("127.0.0.1:9002", httpFrontend)
	r1, err := st.Push(ctx, []byte(a), fleet.PushMeta{Author: "ana", Message: "first", Source: "/tmp/x/a.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := st.Push(ctx, []byte(b), fleet.PushMeta{Author: "bo", Source: "b.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Revision != 1 || r2.Revision != 2 || r1.Source != "a.yaml" || r1.Author != "ana" || len(r1.SHA256) != 64 {
		t.Fatalf("records: %+v %+v", r1, r2)
	}
	// An invalid config is refused and changes nothing.
	_, err = st.Push(ctx, []byte("backendServices:\n- name: bs\n  backends: [{group: nowhere}]\n"), fleet.PushMeta{Author: "ana", Source: "bad.yaml"})
	if err == nil || !strings.Contains(err.Error(), "bad.yaml") {
		t.Fatalf("invalid push: err = %v, want a validation error naming bad.yaml", err)
	}
	cur, _, err := st.Current(ctx)
	if err != nil || cur.Revision != 2 || cur.Config != b {
		t.Fatalf("current after refused push: %+v, %v", cur, err)
	}
	// Rollback writes revision 1's config as revision 3.
	r3, err := st.Rollback(ctx, 1, fleet.PushMeta{Author: "cy"})
	if err != nil {
		t.Fatal(err)
	}
	if r3.Revision != 3 || r3.RollbackOf != 1 || r3.Config != a || r3.SHA256 != r1.SHA256 || r3.Message != "rollback to revision 1" {
		t.Fatalf("rollback record: %+v", r3)
	}
	h, err := st.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var revs []int64
	for _, r := range h {
		revs = append(revs, r.Revision)
	}
	if fmt.Sprint(revs) != "[3 2 1]" {
		t.Fatalf("history revisions = %v, want [3 2 1] (newest first)", revs)
	}
	if _, err := st.Rollback(ctx, 42, fleet.PushMeta{Author: "cy"}); err == nil || !strings.Contains(err.Error(), "revision 42") {
		t.Fatalf("rollback to a revision never pushed: err = %v", err)
	}
	if _, err := st.Push(ctx, []byte(a), fleet.PushMeta{Source: "a.yaml"}); err == nil || !strings.Contains(err.Error(), "--author") {
		t.Fatalf("push without author: err = %v", err)
	}
}

// Concurrent pushes each get a revision of their own, and the history
// keeps the last HistoryLimit.
func TestStoreConcurrentPushesAndTrim(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	st := fleet.NewStore(dial(t, e), "")
	ctx := ctxT(t)
	const workers, each = 8, 7 // 56 pushes: more than HistoryLimit
	const n = workers * each
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				_, err := st.PushUnchecked(ctx, fmt.Appendf(nil, "# push %d.%d\n", w, i), fleet.PushMeta{Author: "w", Source: "c.yaml"})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			failed++
			t.Log(err)
		}
	}
	cur, _, err := st.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Revision != n || failed > 0 {
		t.Fatalf("current revision %d after %d pushes (%d gave up), want one revision per push", cur.Revision, n, failed)
	}
	h, err := st.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != fleet.HistoryLimit || h[0].Revision != cur.Revision || h[len(h)-1].Revision != cur.Revision-fleet.HistoryLimit+1 {
		t.Fatalf("history has %d revisions %d..%d, want the last %d up to %d", len(h), h[0].Revision, h[len(h)-1].Revision, fleet.HistoryLimit, cur.Revision)
	}
	seen := map[string]bool{}
	for _, r := range h {
		if seen[r.Config] {
			t.Fatalf("two revisions hold the same push %q: a push was lost", r.Config)
		}
		seen[r.Config] = true
	}
}

func TestParseEndpoints(t *testing.T) {
	for _, c := range []struct {
		in, want string
		tls      bool
		err      string
	}{
		{in: "etcd://10.0.0.1:2379,10.0.0.2:2379", want: "[10.0.0.1:2379 10.0.0.2:2379]"},
		{in: "127.0.0.1:2379", want: "[127.0.0.1:2379]"},
		{in: "etcds://e1:2379", want: "[e1:2379]", tls: true},
		{in: "http://e1:2379", err: "unknown scheme"},
		{in: "etcd://e1", err: "not host:port"},
		{in: "etcd://", err: "names no etcd endpoint"},
	} {
		eps, tls, err := fleet.ParseEndpoints(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "fix:") {
				t.Errorf("%q: err = %v, want %q with a fix", c.in, err, c.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(eps) != c.want || tls != c.tls {
			t.Errorf("%q = %v %v %v, want %s %v", c.in, eps, tls, err, c.want, c.tls)
		}
	}
}

func freeLoopback(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func writeFile(t *testing.T, path, data string) {
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
