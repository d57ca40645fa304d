package proxy

import (
	"bufio"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwaylb/spillway/internal/h1"
)

// tunnel completes a protocol upgrade (WebSocket): the backend answered
// 101, so the client connection is hijacked, the 101 response is relayed,
// and bytes are copied both ways until either side closes or the tunnel
// has been idle for the request timeout (Google closes idle WebSockets
// after the backend service timeout). Upgrades are never retried.
// A 101 to another protocol than the one asked for never gets here
// (exchange.checkStatus).
func (h *handler) tunnel(x *exchange, resp *http.Response) {
	back, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		h.log.Debug("backend connection cannot be upgraded", "service", x.svc.Name)
		lbAnswer(x.rec, x.w, http.StatusBadGateway, sdUpgradeFailed, "")
		return
	}
	conn, brw, err := http.NewResponseController(x.w).Hijack()
	if err != nil {
		// Google answers a failed upgrade with 403.
		h.log.Debug("client connection cannot be hijacked", "err", err)
		lbAnswer(x.rec, x.w, http.StatusForbidden, sdUpgradeFailed, "")
		return
	}
	defer conn.Close()
	defer back.Close()
	if h.switchProtocols(x, resp, brw, back) {
		h.splice(conn, back, x.timeout)
	}
}

// switchProtocols relays the backend's 101 response to the client and
// passes on the bytes the client sent after its request, already
// buffered; it reports whether the tunnel can start.
func (h *handler) switchProtocols(x *exchange, resp *http.Response, brw *bufio.ReadWriter, back io.Writer) bool {
	hd := x.w.Header()
	h1.CopyHeaders(hd, resp.Header)
	hd["Connection"] = []string{"Upgrade"}
	hd["Upgrade"] = resp.Header["Upgrade"]
	hd["Via"] = h1.AppendVia(resp.Header["Via"], h.via)
	if x.edge != nil {
		x.markRegional(hd, sdSentByBackend) // for the trusted edge
	}
	x.hp.response(hd)
	resp.Header = hd
	resp.Body = nil
	if x.rec != nil {
		x.rec.Status, x.rec.Details = http.StatusSwitchingProtocols, sdSentByBackend
	}
	if err := resp.Write(brw); err != nil {
		return false
	}
	if err := brw.Flush(); err != nil {
		return false
	}
	// Bytes the client sent after its request, already buffered.
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Peek(n)
		if _, err := back.Write(b); err != nil {
			return false
		}
	}
	return true
}

// splice copies bytes both ways between the client connection and the
// backend's until either side closes or neither has sent a byte for
// idle, then closes both.
func (h *handler) splice(conn, back io.ReadWriteCloser, idle time.Duration) {

	var last atomic.Int64 // unix nanos of the latest byte either way
	last.Store(time.Now().UnixNano())
	var once sync.Once
	closeBoth := func() { once.Do(func() { conn.Close(); back.Close() }) }
	var (
		mu    sync.Mutex // guards timer against its own first firing
		timer *time.Timer
	)
	mu.Lock()
	timer = time.AfterFunc(idle, func() {
		if rest := idle - time.Since(time.Unix(0, last.Load())); rest > 0 {
			mu.Lock()
			timer.Reset(rest)
			mu.Unlock()
			return
		}
		closeBoth()
	})
	mu.Unlock()
	defer func() {
		mu.Lock()
		timer.Stop()
		mu.Unlock()
	}()

	done := make(chan struct{}, 2)
	pipe := func(dst io.Writer, src io.Reader) {
		defer func() { done <- struct{}{} }()
		bp := h.bufs.Get().(*[]byte)
		defer h.bufs.Put(bp)
		buf := *bp
		for {
			n, err := src.Read(buf)
			if n > 0 {
				last.Store(time.Now().UnixNano())
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go pipe(back, conn)
	go pipe(conn, back)
	<-done
	closeBoth()
	<-done
}
