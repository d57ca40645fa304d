package serve

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strings"
)

// minAdminToken is the shortest admin token accepted.
const minAdminToken = 16

// adminFix is the fix named by admin listener errors.
const adminFix = "set a token with --admin-token-file FILE or the SPILLWAY_ADMIN_TOKEN environment variable, or listen on loopback, e.g. --admin 127.0.0.1:9901"

// checkAdmin validates the admin options: a non-loopback admin address
// needs a token, and a token must not be trivially short.
func checkAdmin(o Options) error {
	if o.AdminToken != "" && len(o.AdminToken) < minAdminToken {
		return fmt.Errorf("admin token: %d characters is too short, use at least %d (fix: generate one, e.g. head -c 32 /dev/urandom | base64)", len(o.AdminToken), minAdminToken)
	}
	if o.Admin == "" || o.AdminToken != "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(o.Admin); err != nil {
		return fmt.Errorf("admin listener %q: %w (fix: write host:port, e.g. 127.0.0.1:9901)", o.Admin, err)
	}
	if !loopbackAddr(o.Admin) {
		return fmt.Errorf("admin listener %s is not a loopback address and no admin token is set; anyone who can reach it could reload the config (fix: %s)", o.Admin, adminFix)
	}
	return nil
}

// loopbackAddr reports whether host:port names a loopback host: an IP in
// 127.0.0.0/8 or ::1, or localhost. Other host names count as not
// loopback, whatever they resolve to.
func loopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// adminHandler serves the admin API. Access control, outermost first:
//   - on a loopback listener, the Host header must be an IP address or
//     localhost (a page from another site that resolves its own name to
//     127.0.0.1 — DNS rebinding — is refused);
//   - mutating requests from another origin (a browser's Sec-Fetch-Site
//     or Origin says so) are refused (http.CrossOriginProtection);
//   - with a token: every request but GET /healthz when the listener is
//     not loopback, and mutating and profiling requests always, must carry
//     "Authorization: Bearer TOKEN".
func (s *Server) adminHandler(remote bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(s.withMeasured(s.Health()))
	})
	if s.opts.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("GET /metrics", s.metrics.handler())
	ui := s.dash.handler()
	mux.Handle("GET /ui", ui)
	mux.Handle("GET /ui/", ui)
	mux.HandleFunc("POST /reload", func(w http.ResponseWriter, r *http.Request) {
		if s.opts.ConfigPath == "" {
			http.Error(w, "no config file to reload", http.StatusConflict)
			return
		}
		if err := s.ReloadFile(r.Context(), s.opts.ConfigPath); err != nil {
			http.Error(w, "reload rejected, the old config keeps serving:\n"+err.Error(), http.StatusUnprocessableEntity)
			return
		}
		w.Write([]byte("reloaded\n"))
	})
	var h http.Handler = mux
	if s.opts.AdminToken != "" {
		h = requireToken(h, s.opts.AdminToken, remote)
	}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "cross-origin request refused: the admin API takes mutating requests from non-browser clients only", http.StatusForbidden)
	}))
	h = cop.Handler(h)
	if !remote {
		h = loopbackHostOnly(h)
	}
	return h
}

// requireToken wants "Authorization: Bearer token" on the requests that
// need it (see adminHandler). The comparison takes the same time whatever
// the offered token.
func requireToken(next http.Handler, token string, remote bool) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		safe := r.Method == http.MethodGet || r.Method == http.MethodHead
		needed := remote && !(safe && (r.URL.Path == "/healthz" || uiAsset(r.URL.Path))) ||
			!safe || strings.HasPrefix(r.URL.Path, "/debug/pprof/")
		if needed {
			got, ok := bearer(r)
			sum := sha256.Sum256([]byte(got))
			if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="spillway admin"`)
				http.Error(w, "unauthorized: send Authorization: Bearer <admin token> (spillway get-health --admin-token-file FILE, or SPILLWAY_ADMIN_TOKEN)", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// bearer returns the token of an "Authorization: Bearer" header.
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// loopbackHostOnly refuses requests whose Host is a name other than
// localhost: a loopback admin listener is reached as 127.0.0.1, [::1] or
// localhost, never through a DNS name (DNS rebinding).
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if _, err := netip.ParseAddr(host); err != nil && !strings.EqualFold(host, "localhost") {
			http.Error(w, "the admin API answers requests for an IP address or localhost only", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// errAdminNotLoopback is returned when the admin listener bound to a
// non-loopback address without a token (a host name that resolved there).
var errAdminNotLoopback = errors.New("admin listener is not on loopback and no admin token is set (fix: " + adminFix + ")")
