package managedcert_test

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"log"
	"net"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"
)

// pebble is Let's Encrypt's test ACME server, run in the test process on
// loopback. Its validation authority really validates: it resolves names
// with the test's DNS server (every name but nxdomain.test is 127.0.0.1)
// and dials the given HTTP-01 and TLS-ALPN-01 ports there.
type pebble struct {
	directory string
	// caPEM is the directory's own TLS certificate (trusted by the ACME
	// client through directoryCaFile); roots are Pebble's issuing roots.
	caPEM []byte
	roots *x509.CertPool
	log   *syncBuffer
}

// startPebble starts Pebble; validity is its certificates' lifetime (0:
// Pebble's default, 90 days). Pebble reads its environment when it starts
// (random validation sleeps and bad-nonce rejections are turned off), so
// callers must not run in parallel.
func startPebble(t *testing.T, httpPort, tlsPort int, validity time.Duration) *pebble {
	t.Helper()
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	t.Setenv("PEBBLE_AUTHZREUSE", "0")
	p := &pebble{log: &syncBuffer{}}
	logger := log.New(p.log, "pebble ", log.Lmicroseconds)
	store := db.NewMemoryStore()
	profiles := map[string]ca.Profile{"default": {Description: "test", ValidityPeriod: uint64(validity / time.Second)}}
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, profiles)
	validator := va.New(logger, httpPort, tlsPort, false, startDNS(t), store)
	front := wfe.New(logger, store, validator, authority, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
	srv := httptest.NewUnstartedServer(front.Handler())
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p.directory = srv.URL + wfe.DirectoryPath
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	p.roots = x509.NewCertPool()
	p.roots.AddCert(authority.GetRootCert(0).Cert)
	return p
}

// startDNS serves A 127.0.0.1 for every name but nxdomain.test (NXDOMAIN),
// over TCP (as Pebble asks) on loopback, and returns its address.
func startDNS(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		switch {
		case q.Name == "nxdomain.test.":
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.IPv4(127, 0, 0, 1)})
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}

// freePorts returns n ports free on 127.0.0.1 right now (Pebble must know
// the challenge ports before the frontends bind them).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		n, _ := strconv.Atoi(port)
		ports = append(ports, n)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// syncBuffer is a bytes.Buffer safe for concurrent use (Pebble's log).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond every 100 ms until it holds or limit passes.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, still not %s; last: %s", limit, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
