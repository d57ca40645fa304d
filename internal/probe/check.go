package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"time"
)

// maxHeaderBytes caps the response headers a probe reads.
const maxHeaderBytes = 64 << 10

// stage is how far a probe got; a timeout names it ("timeout after 1s
// (await response)") so operators can tell a black-holed network from a
// slow application.
type stage int32

const (
	stageConnect stage = iota
	stageProxyHeader
	stageTLS
	stageWriteRequest
	stageAwaitResponse
	stageReadHeaders
	stageReadBody
	stageReadResponse
)

func (s stage) String() string {
	switch s {
	case stageConnect:
		return "connect"
	case stageProxyHeader:
		return "send PROXY header"
	case stageTLS:
		return "TLS handshake"
	case stageWriteRequest:
		return "write request"
	case stageAwaitResponse:
		return "await response"
	case stageReadHeaders:
		return "read response headers"
	case stageReadBody:
		return "read body"
	case stageReadResponse:
		return "read response"
	}
	return fmt.Sprintf("stage(%d)", int32(s))
}

// progress records the current stage. net/http updates it from its own
// goroutines, hence the atomic, and may keep doing so after RoundTrip has
// returned; so the stage freezes once the probe's context is done, keeping
// the one the probe was in when it timed out.
type progress struct {
	done <-chan struct{} // the probe context's Done channel
	s    atomic.Int32
}

func (pr *progress) set(s stage) {
	select {
	case <-pr.done:
	default:
		pr.s.Store(int32(s))
	}
}

func (pr *progress) get() stage { return stage(pr.s.Load()) }

func (pr *progress) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn:              func(httptrace.GotConnInfo) { pr.set(stageWriteRequest) },
		WroteRequest:         func(httptrace.WroteRequestInfo) { pr.set(stageAwaitResponse) },
		GotFirstResponseByte: func() { pr.set(stageReadHeaders) },
	}
}

// Check probes t once, now, and returns the result without calling the
// report function. It is independent of Run and safe for concurrent use.
// An invalid target yields a failed Result whose Detail starts with
// "invalid target: ".
func (p *Prober) Check(ctx context.Context, t Target) Result {
	if err := t.Validate(); err != nil {
		return Result{Target: t, At: p.now(), Detail: "invalid target: " + err.Error()}
	}
	return p.check(ctx, t, t.Spec.withDefaults())
}

// check runs one probe of t; spec is t.Spec with defaults applied.
func (p *Prober) check(ctx context.Context, t Target, spec Spec) Result {
	res := Result{Target: t, At: p.now()}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()

	pr := progress{done: ctx.Done()}
	var detail string
	var err error
	switch {
	case spec.Type == TypeTCP:
		detail, err = p.checkTCP(ctx, t.Addr, spec, &pr)
	case spec.isGRPC():
		detail, err = p.checkGRPC(ctx, t.Addr, spec, &pr)
	default:
		detail, err = p.checkHTTP(ctx, t.Addr, spec, &pr)
	}
	res.Latency = time.Since(start)

	switch {
	case err == nil:
		res.OK, res.Detail = true, detail
	case errors.Is(ctx.Err(), context.Canceled):
		res.Detail = "canceled: " + err.Error()
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || isTimeout(err):
		res.Detail = fmt.Sprintf("timeout after %s (%s)", spec.Timeout, pr.get())
	default:
		res.Detail = err.Error()
	}
	return res
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// dial connects to addr and sends the PROXY header if spec asks for it.
// The connection's deadline is ctx's deadline, and cancelling ctx unblocks
// any I/O on it, so nothing done on the connection can outlive the probe.
func (p *Prober) dial(ctx context.Context, addr string, spec Spec, pr *progress) (net.Conn, error) {
	pr.set(stageConnect)
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	// A deadline in the past unblocks any pending I/O. This runs at the
	// latest when check cancels ctx on return; setting a deadline on a
	// closed connection is harmless.
	context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	if spec.ProxyHeader == ProxyHeaderV1 {
		pr.set(stageProxyHeader)
		if _, err := io.WriteString(conn, proxyV1Header); err != nil {
			conn.Close()
			return nil, fmt.Errorf("send PROXY header: %w", err)
		}
	}
	return conn, nil
}

// dialTLS is dial followed by a TLS handshake offering only the ALPN
// protocol proto; if the server negotiates any other protocol explicitly, or
// none when proto is "h2", the probe fails.
func (p *Prober) dialTLS(ctx context.Context, addr string, spec Spec, proto string, pr *progress) (*tls.Conn, error) {
	raw, err := p.dial(ctx, addr, spec, pr)
	if err != nil {
		return nil, err
	}
	pr.set(stageTLS)
	cfg := p.tlsConfig.Clone()
	cfg.NextProtos = []string{proto}
	if cfg.ServerName == "" {
		cfg.ServerName = serverName(spec.Host, addr)
	}
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("tls handshake: %w", err)
	}
	got := conn.ConnectionState().NegotiatedProtocol
	if got != proto && (got != "" || proto == "h2") {
		conn.Close()
		return nil, fmt.Errorf("tls handshake: server negotiated ALPN %q, want %q", got, proto)
	}
	return conn, nil
}

// checkHTTP runs an HTTP, HTTPS or HTTP2 probe. It builds a Transport per
// probe (cheap next to a TCP+TLS handshake) so connections are never
// shared: DisableKeepAlives plus CloseIdleConnections guarantee a fresh
// connection, and calling RoundTrip directly means redirects are never
// followed. HTTP/2 uses net/http's built-in implementation (selected by
// ForceAttemptHTTP2 and the "h2" ALPN result of dialTLS) rather than
// golang.org/x/net/http2, whose idna dependency would need golang.org/x/text
// added to go.sum.
func (p *Prober) checkHTTP(ctx context.Context, addr string, spec Spec, pr *progress) (string, error) {
	u, err := url.ParseRequestURI(spec.Path)
	if err != nil {
		return "", fmt.Errorf("request path %q: %w", spec.Path, err)
	}
	u.Scheme, u.Host = "https", addr
	if spec.Type == TypeHTTP {
		u.Scheme = "http"
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, pr.trace()), http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("build request: %w", err)
	}
	req.Host = hostHeader(spec.Host, addr)
	req.Header.Set("User-Agent", UserAgent)
	req.Close = true

	tr := &http.Transport{
		// Proxy stays nil: probes go straight to the endpoint, never via
		// an HTTP(S)_PROXY from the environment.
		DisableKeepAlives:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxHeaderBytes,
	}
	// The dialers ignore the Transport's context and address: they use the
	// probe's, so the whole probe is bounded by spec.Timeout.
	switch spec.Type {
	case TypeHTTP:
		tr.DialContext = func(context.Context, string, string) (net.Conn, error) {
			return p.dial(ctx, addr, spec, pr)
		}
	case TypeHTTPS:
		tr.DialTLSContext = func(context.Context, string, string) (net.Conn, error) {
			return p.dialTLS(ctx, addr, spec, "http/1.1", pr)
		}
	case TypeHTTP2:
		tr.ForceAttemptHTTP2 = true
		tr.DialTLSContext = func(context.Context, string, string) (net.Conn, error) {
			return p.dialTLS(ctx, addr, spec, "h2", pr)
		}
	}
	defer tr.CloseIdleConnections()

	resp, err := tr.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if spec.Type == TypeHTTP2 && resp.ProtoMajor != 2 {
		return "", fmt.Errorf("got %s response, want HTTP/2", resp.Proto)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if spec.Response != "" {
		pr.set(stageReadBody)
		body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseLen))
		if err != nil {
			return "", fmt.Errorf("read body: %w", err)
		}
		if !bytes.Contains(body, []byte(spec.Response)) {
			return "", fmt.Errorf("response did not contain %q", spec.Response)
		}
	}
	return "HTTP 200", nil
}

// checkTCP runs a TCP probe: connect, then optionally send spec.Request and
// compare the next len(spec.Response) bytes with spec.Response.
func (p *Prober) checkTCP(ctx context.Context, addr string, spec Spec, pr *progress) (string, error) {
	conn, err := p.dial(ctx, addr, spec, pr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if spec.Request != "" {
		pr.set(stageWriteRequest)
		if _, err := io.WriteString(conn, spec.Request); err != nil {
			return "", fmt.Errorf("write request: %w", err)
		}
	}
	if spec.Response == "" {
		return "connected", nil
	}
	pr.set(stageReadResponse)
	buf := make([]byte, len(spec.Response))
	n, err := io.ReadFull(conn, buf)
	if err != nil {
		return "", fmt.Errorf("read response (got %q): %w", buf[:n], err)
	}
	if string(buf) != spec.Response {
		return "", fmt.Errorf("response %q did not match %q", buf, spec.Response)
	}
	return "response matched", nil
}
