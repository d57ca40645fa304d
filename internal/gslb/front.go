package gslb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Front is the sockets of a DNS GSLB server's frontends (UDP and TCP on
// each address) and the loops that serve them. The Server that answers
// can be replaced while they run (Swap): a config reload then keeps every
// socket, the UDP queries queued in them and every open TCP connection,
// and the next query is answered by the new Server.
type Front struct {
	cur   atomic.Pointer[Server]
	log   *slog.Logger
	key   []string          // the frontends' "name=address", as configured
	addrs map[string]string // frontend name → bound address
	udps  []*net.UDPConn
	tcps  []*dns.Server
	pkt   []bool // per UDP socket: read destinations (wildcard bind)
	// rawFD maps a UDP socket served by blocking threads (udp_linux.go,
	// which closes the *net.UDPConn) to the descriptor they read.
	rawFD sync.Map
	// shared is set once Files handed the sockets out: another process
	// may serve them, so stopping must not shut them down (shutdown acts
	// on the socket, in every process that holds it).
	shared atomic.Bool
}

// Listen binds every DNS frontend of s (UDP and TCP on the same address)
// and returns them ready to Serve, answering with s.
func Listen(s *Server) (*Front, error) { return ListenWith(s, listenBoth) }

// ListenWith is Listen with bind binding each DNS frontend's UDP and
// TCP sockets (a binary upgrade passes one that takes them from the old
// process).
func ListenWith(s *Server, bind func(addr string) (*net.UDPConn, net.Listener, error)) (*Front, error) {
	f := &Front{log: s.log, key: frontendKey(s), addrs: map[string]string{}}
	f.cur.Store(s)
	for _, fe := range s.frontends {
		pc, ln, err := bind(fe.Address)
		if err != nil {
			f.close()
			return nil, fmt.Errorf("gslb: frontend %s: %w", fe.Name, err)
		}
		pktinfo, err := askDestination(pc)
		if err != nil {
			_ = pc.Close()
			_ = ln.Close()
			f.close()
			return nil, fmt.Errorf("gslb: frontend %s: %w", fe.Name, err)
		}
		f.udps = append(f.udps, pc)
		f.pkt = append(f.pkt, pktinfo)
		f.tcps = append(f.tcps,
			// MaxTCPQueries -1: a connection carries any number of
			// queries (RFC 7766 §6.2.1; miekg's default closed it after
			// 128). It still ends after miekg's 8 s idle timeout.
			&dns.Server{Listener: newDrainListener(ln), Handler: dns.HandlerFunc(f.serveDNS), MsgAcceptFunc: MsgAcceptFunc,
				DecorateReader: DecorateReader,
				ReadTimeout:    10 * time.Second, WriteTimeout: 10 * time.Second, MaxTCPQueries: -1,
				// TSIG keys follow the Server answering (reloads).
				TsigProvider: frontTsig{f}})
		f.addrs[fe.Name] = pc.LocalAddr().String()
		s.log.Info("frontend listening", "frontend", fe.Name, "address", pc.LocalAddr().String(), "protocol", "DNS")
	}
	return f, nil
}

// frontendKey lists s's DNS frontends as configured.
func frontendKey(s *Server) []string {
	var k []string
	for _, fe := range s.frontends {
		k = append(k, fe.Name+"="+fe.Address)
	}
	return k
}

// Files returns duplicates of every socket (UDP and TCP listeners), for
// a binary upgrade to hand over.
func (f *Front) Files() ([]*os.File, error) {
	f.shared.Store(true)
	var out []*os.File
	for _, pc := range f.udps {
		if fd, ok := f.rawFD.Load(pc); ok {
			fl, err := dupFile(fd.(int))
			if err != nil {
				return out, err
			}
			out = append(out, fl)
			continue
		}
		fl, err := pc.File()
		if err != nil {
			return out, err
		}
		out = append(out, fl)
	}
	for _, srv := range f.tcps {
		l, ok := srv.Listener.(interface{ File() (*os.File, error) })
		if !ok {
			return out, fmt.Errorf("gslb: %T has no file descriptor", srv.Listener)
		}
		fl, err := l.File()
		if err != nil {
			return out, err
		}
		out = append(out, fl)
	}
	return out, nil
}

// ListenBoth binds UDP and TCP on the same address, as Listen does.
func ListenBoth(addr string) (*net.UDPConn, net.Listener, error) { return listenBoth(addr) }

// Addr returns the address frontend is bound to ("" if none).
func (f *Front) Addr(frontend string) string { return f.addrs[frontend] }

// Addrs returns every frontend's bound address by name.
func (f *Front) Addrs() map[string]string { return f.addrs }

// Server returns the Server answering now.
func (f *Front) Server() *Server { return f.cur.Load() }

// Swap makes s answer every query from now on. It reports false, and
// changes nothing, when s's DNS frontends (names and configured
// addresses) differ from the ones f is bound to: the caller must then
// Listen anew.
func (f *Front) Swap(s *Server) bool {
	if !slices.Equal(frontendKey(s), f.key) {
		return false
	}
	f.cur.Store(s)
	return true
}

// serveDNS answers a TCP query with the current Server. A panic while
// answering (a bug) is logged and closes that connection; miekg/dns's
// server would let it take the process, HTTP proxy included, down.
func (f *Front) serveDNS(w dns.ResponseWriter, r *dns.Msg) {
	defer func() {
		if v := recover(); v != nil {
			f.log.Error("gslb: panic answering a TCP query; connection closed", "from", w.RemoteAddr(), "panic", v)
			_ = w.Close()
		}
	}()
	f.cur.Load().serveDNS(w, r)
}

// Serve answers queries on every socket until ctx is done, then shuts the
// listeners down (TCP connections just accepted get up to 2 s to deliver
// their first query, open ones up to 5 s to finish) and
// returns nil; or returns the error of a listener that fails.
func (f *Front) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(f.tcps)+len(f.udps))
	stopUDP := make(chan struct{})
	var wg sync.WaitGroup
	for i, pc := range f.udps {
		wg.Go(func() {
			if err := f.serveUDP(pc, f.pkt[i], stopUDP); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("gslb: serve udp: %w", err)
				cancel()
			}
		})
	}
	for _, srv := range f.tcps {
		wg.Go(func() {
			if err := srv.ActivateAndServe(); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("gslb: serve: %w", err)
				cancel()
			}
		})
	}
	<-ctx.Done()
	// Stop accepting, let the queries of connections just accepted
	// arrive (drainListener), then cut what is idle.
	dctx, dcancel := context.WithTimeout(context.Background(), drainWait)
	for _, srv := range f.tcps {
		if dl, ok := srv.Listener.(*drainListener); ok {
			dl.drain(dctx)
		}
	}
	dcancel()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	for _, srv := range f.tcps {
		_ = srv.ShutdownContext(sctx)
	}
	close(stopUDP)
	for _, pc := range f.udps {
		_ = pc.Close()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// close closes the sockets of a Front that never served.
func (f *Front) close() {
	var errs []error
	for _, srv := range f.tcps {
		errs = append(errs, srv.Listener.Close())
	}
	for _, pc := range f.udps {
		errs = append(errs, pc.Close())
	}
	_ = errors.Join(errs...)
}

// frontTsig is the TSIG provider of a Front's TCP listeners: the keys of
// the Server answering at the time, so a reload's keys apply to the next
// request.
type frontTsig struct{ f *Front }

// Generate implements dns.TsigProvider.
func (t frontTsig) Generate(msg []byte, ts *dns.TSIG) ([]byte, error) {
	return t.f.cur.Load().tsig.Generate(msg, ts)
}

// Verify implements dns.TsigProvider.
func (t frontTsig) Verify(msg []byte, ts *dns.TSIG) error { return t.f.cur.Load().tsig.Verify(msg, ts) }
