package admin

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tok := strings.Repeat("x", minAdminToken)
	for _, tc := range []struct {
		name string
		o    Options
		want string // substring of the error, "" for none
	}{
		{"none", Options{}, ""},
		{"loopback v4", Options{Addr: "127.0.0.1:9901"}, ""},
		{"loopback v6", Options{Addr: "[::1]:9901"}, ""},
		{"localhost", Options{Addr: "localhost:9901"}, ""},
		{"remote with token", Options{Addr: "0.0.0.0:9901", Token: tok}, ""},
		{"remote without token", Options{Addr: "0.0.0.0:9901"}, "not a loopback address"},
		{"host name without token", Options{Addr: "admin.example:9901"}, "not a loopback address"},
		{"short token", Options{Addr: "127.0.0.1:9901", Token: "short"}, "too short"},
		{"no port", Options{Addr: "127.0.0.1"}, "write host:port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.o)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Check: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// The component binds on Start, serves its routes, and is gone after
// Stop; a nil Server (no admin address) is a no-op.
func TestLifecycle(t *testing.T) {
	var none *Server = New(Options{}, Routes{})
	if none != nil || none.Start(context.Background()) != nil || none.Stop(context.Background()) != nil || none.Addr() != "" {
		t.Fatal("no admin address: want a nil, no-op Server")
	}
	a := New(Options{Addr: "127.0.0.1:0"}, Routes{
		Health:  func() any { return map[string]int{"version": 7} },
		Metrics: http.NotFoundHandler(),
		UI:      http.NotFoundHandler(),
	})
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + a.Addr() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"version": 7`) {
		t.Fatalf("GET /health = %q", body)
	}
	resp, err = http.Post("http://"+a.Addr()+"/reload", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("POST /reload without a config file: %d, want 409", resp.StatusCode)
	}
	addr := a.Addr()
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Fatal("admin listener still answers after Stop")
	}
}
