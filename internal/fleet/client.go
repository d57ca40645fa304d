// Package fleet lets several Spillway instances share one config through
// etcd (issue 11, first slice): a Store holds the config with a revision,
// its author and a bounded history; an Agent, one per `spillway serve
// --fleet` instance, watches it, applies every new revision with the
// usual reload rules, reports the result, and keeps serving its last good
// config, marked stale, while etcd is unreachable. docs/fleet.md has the
// design and the key layout.
package fleet

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// DefaultPrefix is the key prefix of a fleet's keys in etcd.
const DefaultPrefix = "/spillway/"

// ClientConfig is how to reach the fleet's etcd: the --fleet flags.
type ClientConfig struct {
	// Endpoints are etcd client addresses, host:port.
	Endpoints []string
	// CAFile, CertFile and KeyFile turn on TLS: CAFile is the CA that
	// signed etcd's server certificate (default: the system roots),
	// CertFile and KeyFile a client certificate (both or neither).
	CAFile, CertFile, KeyFile string
	// Secure turns on TLS with the system roots when no file is given
	// (the etcds:// scheme).
	Secure bool
	// Username and Password, when Username is set, authenticate to etcd.
	Username, Password string
	// DialTimeout bounds the first connection (0 = 5 s).
	DialTimeout time.Duration
	// AutoSync, when positive, refreshes the endpoints from etcd's member
	// list that often: a client given one member (its own, with
	// --fleet-embedded) learns the others' client URLs and reaches the
	// cluster through them when that member is down.
	AutoSync time.Duration
}

// ParseEndpoints parses the --fleet value: "etcd://host:2379,host:2379"
// (the scheme is optional; "etcd" and "etcds" — TLS — are the only ones;
// each address needs a port).
func ParseEndpoints(v string) (eps []string, tlsScheme bool, err error) {
	rest := strings.TrimSpace(v)
	switch {
	case strings.HasPrefix(rest, "etcds://"):
		rest, tlsScheme = strings.TrimPrefix(rest, "etcds://"), true
	case strings.HasPrefix(rest, "etcd://"):
		rest = strings.TrimPrefix(rest, "etcd://")
	case strings.Contains(rest, "://"):
		return nil, false, fmt.Errorf("--fleet %q: unknown scheme (fix: write etcd://host:2379,host:2379, or etcds:// for TLS)", v)
	}
	for _, a := range strings.Split(rest, ",") {
		a = strings.TrimPrefix(strings.TrimSpace(a), "etcd://")
		if a == "" {
			continue
		}
		host, port, err := net.SplitHostPort(a)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || strings.ContainsAny(host, "/@?#") || perr != nil || n < 1 || n > 65535 {
			return nil, false, fmt.Errorf("--fleet %q: %q is not host:port (fix: write etcd://host:2379,host:2379)", v, a)
		}
		eps = append(eps, a)
	}
	if len(eps) == 0 {
		return nil, false, fmt.Errorf("--fleet %q names no etcd endpoint (fix: write etcd://host:2379,host:2379)", v)
	}
	return eps, tlsScheme, nil
}

// TLS reports whether the config asks for TLS.
func (c ClientConfig) TLS() bool {
	return c.Secure || c.CAFile != "" || c.CertFile != "" || c.KeyFile != ""
}

// clientv3 returns the etcd client configuration.
func (c ClientConfig) clientv3() (clientv3.Config, error) {
	if len(c.Endpoints) == 0 {
		return clientv3.Config{}, errors.New("fleet: no etcd endpoints (fix: give --fleet etcd://host:2379)")
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return clientv3.Config{}, errors.New("fleet: --fleet-cert and --fleet-key go together (fix: give both, or neither)")
	}
	if c.Password != "" && c.Username == "" {
		return clientv3.Config{}, errors.New("fleet: a password without --fleet-user (fix: give --fleet-user NAME)")
	}
	dial := c.DialTimeout
	if dial == 0 {
		dial = 5 * time.Second
	}
	cc := clientv3.Config{
		Endpoints:   c.Endpoints,
		DialTimeout: dial,
		Username:    c.Username,
		Password:    c.Password,
		// Keepalives on the gRPC connection notice a dead etcd quickly.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		AutoSyncInterval:     max(c.AutoSync, 0),
		// The agent logs what matters; the client's own retry warnings
		// would flood the log while etcd is down.
		Logger: zap.NewNop(),
	}
	if c.TLS() {
		info := transport.TLSInfo{CertFile: c.CertFile, KeyFile: c.KeyFile, TrustedCAFile: c.CAFile}
		var tc *tls.Config
		var err error
		if c.CertFile == "" && c.CAFile == "" {
			tc = &tls.Config{MinVersion: tls.VersionTLS12}
		} else if tc, err = info.ClientConfig(); err != nil {
			return clientv3.Config{}, fmt.Errorf("fleet: TLS files (--fleet-ca %q, --fleet-cert %q, --fleet-key %q): %w", c.CAFile, c.CertFile, c.KeyFile, err)
		}
		cc.TLS = tc
	}
	return cc, nil
}

// Dial returns an etcd client. It does not wait for etcd: the client
// connects in the background and requests fail until it has.
func (c ClientConfig) Dial() (*clientv3.Client, error) {
	cc, err := c.clientv3()
	if err != nil {
		return nil, err
	}
	cl, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("fleet: etcd client for %s: %w", strings.Join(c.Endpoints, ","), err)
	}
	return cl, nil
}
