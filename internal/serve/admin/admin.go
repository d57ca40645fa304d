// Package admin is the admin listener of spillway serve: the get-health
// API, /metrics, the dashboard, reloads, the runtime overlay (/overlay:
// drains, capacity scalers and weights) and (opt-in) profiling, behind
// loopback-only or token access control, with limits of its own (see
// Limits). It is a component with a lifecycle (Start, Stop); what it
// serves comes from Routes, read-only views of the running server.
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spillwaylb/spillway/internal/serve/connlimit"
)

// minAdminToken is the shortest admin token accepted.
const minAdminToken = 16

// adminFix is the fix named by admin listener errors.
const adminFix = "set a token with --admin-token-file FILE or the SPILLWAY_ADMIN_TOKEN environment variable, or listen on loopback, e.g. --admin 127.0.0.1:9901"

// Options configure the admin listener.
type Options struct {
	// Addr is the listener's address ("" = no admin listener). An
	// address that is not loopback (127.0.0.0/8, ::1, localhost) needs
	// Token.
	Addr string
	// Token, when set, is the bearer token the admin API wants: on every
	// endpoint but GET /healthz when Addr is not loopback, and on
	// mutating endpoints (POST /reload) and profiling always. At least 16
	// characters.
	Token string
	// Limits bound the listener (zero fields take their defaults).
	Limits Limits
	// Pprof serves net/http/pprof under /debug/pprof/ (off by default).
	Pprof bool
	// Listen binds the listener (nil: net.Listen on tcp); a binary
	// upgrade passes one that takes the old process's socket.
	Listen func(addr string) (net.Listener, error)
}

// Routes are what the admin API serves, read-only views of the running
// server.
type Routes struct {
	// Health is GET /health's body, encoded as indented JSON.
	Health func() any
	// Metrics serves GET /metrics.
	Metrics http.Handler
	// UI serves the dashboard: GET /ui and everything under /ui/.
	UI http.Handler
	// Reload re-reads the config file (POST /reload); nil when the server
	// has no config file (409).
	Reload func(ctx context.Context) error
	// Overlay serves GET /overlay (the runtime overlay) and POST /overlay
	// (change it: spillway ctl); nil: 404.
	Overlay http.Handler
	// CacheInvalidate serves POST /cache/invalidate (Cloud CDN cache
	// invalidation: spillway cache invalidate); nil: 404.
	CacheInvalidate http.Handler
}

// Check validates the admin options: a non-loopback admin address needs
// a token, and a token must not be trivially short.
func Check(o Options) error {
	if o.Token != "" && len(o.Token) < minAdminToken {
		return fmt.Errorf("admin token: %d characters is too short, use at least %d (fix: generate one, e.g. head -c 32 /dev/urandom | base64)", len(o.Token), minAdminToken)
	}
	if o.Addr == "" || o.Token != "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		return fmt.Errorf("admin listener %q: %w (fix: write host:port, e.g. 127.0.0.1:9901)", o.Addr, err)
	}
	if !loopbackAddr(o.Addr) {
		return fmt.Errorf("admin listener %s is not a loopback address and no admin token is set; anyone who can reach it could reload the config (fix: %s)", o.Addr, adminFix)
	}
	return nil
}

// Server is the admin listener, a component of spillway serve: Start
// binds and serves it, Stop shuts it down.
type Server struct {
	opts   Options
	routes Routes

	mu   sync.Mutex
	addr string
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

// New returns the admin listener for o, serving r; nil when o.Addr is
// empty (no admin listener: Start, Stop and Addr are no-ops).
func New(o Options, r Routes) *Server {
	if o.Addr == "" {
		return nil
	}
	return &Server{opts: o, routes: r}
}

// Start binds the listener and serves it until Stop. A host name that
// resolves to a non-loopback address without a token is refused here
// (Check sees only the name).
func (a *Server) Start(context.Context) error {
	if a == nil {
		return nil
	}
	listen := a.opts.Listen
	if listen == nil {
		listen = func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
	}
	ln, err := listen(a.opts.Addr)
	if err != nil {
		return fmt.Errorf("admin listener %s: %w", a.opts.Addr, err)
	}
	remote := !loopbackAddr(ln.Addr().String())
	if remote && a.opts.Token == "" {
		ln.Close()
		return fmt.Errorf("admin listener %s (bound to %s): %w", a.opts.Addr, ln.Addr(), errAdminNotLoopback)
	}
	srv, aln := a.newServer(ln, remote)
	done := make(chan struct{})
	a.mu.Lock()
	a.addr, a.ln, a.srv, a.done = ln.Addr().String(), ln, srv, done
	a.mu.Unlock()
	go func() { defer close(done); srv.Serve(aln) }()
	return nil
}

// Stop shuts the listener down, waiting for requests in flight until ctx
// ends.
func (a *Server) Stop(ctx context.Context) error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	srv, done := a.srv, a.done
	a.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	<-done
	return err
}

// Addr returns the bound address ("" before Start, or without a
// listener).
func (a *Server) Addr() string {
	if a == nil {
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addr
}

// Listener returns the bound listener (nil before Start or without a
// listener), for a binary upgrade to hand over.
func (a *Server) Listener() net.Listener {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ln
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

// handler serves the admin API. Access control, outermost first:
//   - on a loopback listener, the Host header must be an IP address or
//     localhost (a page from another site that resolves its own name to
//     127.0.0.1 — DNS rebinding — is refused);
//   - mutating requests from another origin (a browser's Sec-Fetch-Site
//     or Origin says so) are refused (http.CrossOriginProtection);
//   - with a token: every request but GET /healthz when the listener is
//     not loopback, and mutating and profiling requests always, must carry
//     "Authorization: Bearer TOKEN".
func (a *Server) handler(remote bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(a.routes.Health())
	})
	if a.opts.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("GET /metrics", a.routes.Metrics)
	mux.Handle("GET /ui", a.routes.UI)
	mux.Handle("GET /ui/", a.routes.UI)
	mux.HandleFunc("POST /reload", func(w http.ResponseWriter, r *http.Request) {
		if a.routes.Reload == nil {
			http.Error(w, "no config file to reload", http.StatusConflict)
			return
		}
		if err := a.routes.Reload(r.Context()); err != nil {
			http.Error(w, "reload rejected, the old config keeps serving:\n"+err.Error(), http.StatusUnprocessableEntity)
			return
		}
		w.Write([]byte("reloaded\n"))
	})
	if a.routes.CacheInvalidate != nil {
		mux.Handle("POST /cache/invalidate", a.routes.CacheInvalidate)
	}
	if a.routes.Overlay != nil {
		mux.Handle("GET /overlay", a.routes.Overlay)
		mux.Handle("POST /overlay", a.routes.Overlay)
	}
	var h http.Handler = mux
	if a.opts.Token != "" {
		h = requireToken(h, a.opts.Token, remote)
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

// Limits bound the admin listener, apart from the frontends' limits
// (docs/security.md, "Admin API"). A zero field takes its default.
type Limits struct {
	// MaxConnections bounds the admin listener's open connections
	// (0 = 64; negative = no limit). It is a budget of its own, not a
	// share of the frontends' connection limit, so that the admin API stays
	// reachable while clients hold every data-plane slot. Past it, new
	// connections wait in the kernel's accept queue until one closes.
	MaxConnections int
	// IdleTimeout closes a keep-alive connection idle this long
	// (0 = 2 min).
	IdleTimeout time.Duration
	// ReadTimeout bounds reading a request, head and body (0 = 30 s); the
	// head alone gets at most 10 s.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response, counted from the end of its
	// request's head (0 = 30 s). A pprof profile or trace of N seconds
	// gets N seconds more.
	WriteTimeout time.Duration
}

// Admin listener defaults (Limits) and fixed bounds. 64 connections
// cover Prometheus, a few dashboards (a browser opens up to 6) and
// get-health; the 2-minute idle timeout outlasts the usual scrape
// intervals so that scrapers keep their connection.
const (
	defaultAdminMaxConnections = 64
	defaultAdminIdleTimeout    = 2 * time.Minute
	defaultAdminReadTimeout    = 30 * time.Second
	defaultAdminWriteTimeout   = 30 * time.Second
	// adminHeaderTimeout bounds reading a request head.
	adminHeaderTimeout = 10 * time.Second
	// adminMaxHeaderBytes bounds a request head (431 past it): room for a
	// token and a browser's localhost cookies.
	adminMaxHeaderBytes = 32 << 10
	// maxProfileSeconds is the longest pprof profile, trace or delta
	// profile served.
	maxProfileSeconds = 3600
)

// withDefaults fills in Limits' zero fields.
func (l Limits) withDefaults() Limits {
	if l.MaxConnections == 0 {
		l.MaxConnections = defaultAdminMaxConnections
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = defaultAdminIdleTimeout
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = defaultAdminReadTimeout
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = defaultAdminWriteTimeout
	}
	return l
}

// newServer returns the admin API's server and ln wrapped in the
// admin connection limit. Every connection is bounded: the request head
// by 10 s (or ReadTimeout if shorter) and 32 KiB, the whole request by
// ReadTimeout, the response by WriteTimeout, the wait for a next request
// by IdleTimeout.
func (a *Server) newServer(ln net.Listener, remote bool) (*http.Server, net.Listener) {
	lim := a.opts.Limits.withDefaults()
	srv := &http.Server{
		Handler:           capProfileSeconds(a.handler(remote)),
		ReadHeaderTimeout: min(adminHeaderTimeout, lim.ReadTimeout),
		ReadTimeout:       lim.ReadTimeout,
		// net/http/pprof moves the write deadline by a profile's
		// duration itself.
		WriteTimeout:   lim.WriteTimeout,
		IdleTimeout:    lim.IdleTimeout,
		MaxHeaderBytes: adminMaxHeaderBytes,
	}
	return srv, connlimit.New(lim.MaxConnections).Wrap(ln)
}

// capProfileSeconds refuses pprof requests for more than an hour
// (?seconds=N of a CPU profile, trace or delta profile). net/http/pprof
// moves the write deadline by N itself, and net/http lifts the read
// deadline while a handler runs, so a profile runs its N seconds despite
// the admin timeouts; this bounds N.
func capProfileSeconds(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
			n, err := strconv.ParseFloat(r.URL.Query().Get("seconds"), 64)
			if err == nil && !(n <= maxProfileSeconds) { // NaN too
				http.Error(w, fmt.Sprintf("seconds: at most %d", maxProfileSeconds), http.StatusBadRequest)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// uiAsset reports whether path is one of the dashboard's static files,
// which hold no data and are served without the admin token (the page
// then sends the token, from its URL fragment, with each data request).
func uiAsset(path string) bool {
	return path == "/ui" || (strings.HasPrefix(path, "/ui/") && path != "/ui/state")
}
