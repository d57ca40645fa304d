package probe

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// checkGRPC runs a GRPC or GRPC_WITH_TLS probe: one unary
// grpc.health.v1.Health/Check call for spec.GRPCService on a fresh
// connection (HTTP/2 cleartext for GRPC, TLS with ALPN "h2" and the
// Prober's TLS settings for GRPC_WITH_TLS). Google's semantics: only
// SERVING is healthy; NOT_SERVING, SERVICE_UNKNOWN (a Check answered with
// code NOT_FOUND: the server does not know the service) and every error
// (UNIMPLEMENTED when the server has no health service, a connect error,
// the timeout) are unhealthy.
func (p *Prober) checkGRPC(ctx context.Context, addr string, spec Spec, pr *progress) (string, error) {
	creds := insecure.NewCredentials()
	if spec.Type == TypeGRPCTLS {
		cfg := p.tlsConfig.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = serverName(spec.Host, addr)
		}
		creds = credentials.NewTLS(cfg) // sets ALPN "h2"
	}
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(creds),
		// The dialer uses the probe's context, so connect, handshake and
		// call are all bounded by spec.Timeout; gRPC's own retry and
		// backoff never run past it.
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) {
			c, err := p.dial(ctx, addr, spec, pr)
			if err == nil && spec.Type == TypeGRPCTLS {
				pr.set(stageTLS)
			} else if err == nil {
				pr.set(stageAwaitResponse)
			}
			return c, err
		}),
		grpc.WithUserAgent(UserAgent),
	)
	if err != nil {
		return "", fmt.Errorf("grpc client for %s: %w", addr, err)
	}
	defer conn.Close()
	// Without WaitForReady the call fails as soon as the first connection
	// attempt does ("connection refused"), instead of waiting out the
	// timeout.
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: spec.GRPCService})
	if err != nil {
		return "", grpcError(err, spec.GRPCService)
	}
	if st := resp.GetStatus(); st != healthpb.HealthCheckResponse_SERVING {
		return "", fmt.Errorf("gRPC %s", st)
	}
	return "gRPC SERVING", nil
}

// grpcError names a failed Health/Check call the way operators read it.
func grpcError(err error, service string) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.NotFound:
		return fmt.Errorf("gRPC SERVICE_UNKNOWN: the server does not know service %q", service)
	case codes.Unimplemented:
		return fmt.Errorf("gRPC UNIMPLEMENTED: the server has no grpc.health.v1.Health service")
	case codes.DeadlineExceeded, codes.Canceled:
		return context.DeadlineExceeded
	}
	return fmt.Errorf("gRPC %s: %s", st.Code(), st.Message())
}
