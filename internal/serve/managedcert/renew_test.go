package managedcert_test

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/serve/managedcert"
)

// Renewal ahead of expiry, and a domain that cannot be validated: with
// 20-second certificates and a renewal window of half their lifetime, the
// certificate is replaced before it expires; a name that does not
// resolve is FAILED_NOT_VISIBLE while the other stays ACTIVE.
func TestManagerRenewsAndReportsFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pb := startPebble(t, ln.Addr().(*net.TCPAddr).Port, freePorts(t, 1)[0], 20*time.Second)
	m := managedcert.New(nil, nil)
	t.Cleanup(m.Stop)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !m.ServeChallenge(w, r) {
			http.NotFound(w, r)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	s := managedcert.Settings{
		DirectoryURL: pb.directory, RootsPEM: string(pb.caPEM), StorageDir: t.TempDir(),
		HTTP01: true, HTTPAddr: ln.Addr().String(), RenewalWindowRatio: 0.5, RenewCheckInterval: time.Second,
	}
	if err := m.Apply(s, []string{"renew.spillway.test", "nxdomain.test"}); err != nil {
		t.Fatal(err)
	}
	good, bad := []string{"renew.spillway.test"}, []string{"nxdomain.test"}
	var first time.Time
	waitFor(t, 60*time.Second, "ACTIVE", func() (bool, string) {
		st := m.Status(good)
		first = st.ExpireTime
		return st.Status == "ACTIVE" && !first.IsZero(), fmt.Sprintf("%+v", st)
	})
	waitFor(t, 60*time.Second, "FAILED_NOT_VISIBLE", func() (bool, string) {
		st := m.Status(bad)
		return st.DomainStatus["nxdomain.test"] == "FAILED_NOT_VISIBLE" && st.Status == "PROVISIONING_FAILED", fmt.Sprintf("%+v", st)
	})
	waitFor(t, 60*time.Second, "renewed", func() (bool, string) {
		st := m.Status(good)
		return st.Status == "ACTIVE" && st.ExpireTime.After(first), fmt.Sprintf("%+v (first expiry %v)", st, first)
	})
	// The renewal window opens 10 s before expiry and is checked every
	// second: a renewal seen only after expiry is a renewal that was late.
	if now := time.Now(); now.After(first) {
		t.Errorf("renewed %v after the first certificate expired, want ahead of expiry", now.Sub(first))
	}
}
