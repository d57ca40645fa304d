package h2

import (
	"net/http"
	"runtime"

	"golang.org/x/net/http2"
)

// start registers st and runs its handler, or queues it while
// MaxConcurrentStreams handlers still run (streams reset by the client
// keep their handler until it returns). More than four times that many
// queued is a rapid-reset attack: GOAWAY ENHANCE_YOUR_CALM, as x/net.
func (c *conn) start(st *stream) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.goingAway && st.id > c.goAwayLast {
		st.cancel()
		return nil
	}
	st.sendWindow = int64(c.peerInitWindow)
	st.inflow.avail = c.streamWindow
	c.streams[st.id] = st
	if c.idle != nil && len(c.streams) == 1 {
		c.idle.Stop()
	}
	if c.handlers < int(c.maxStreams) {
		c.handlers++
		c.s.workers.run(c, st)
		return nil
	}
	if len(c.queued) > 4*int(c.maxStreams) {
		return connError(http2.ErrCodeEnhanceYourCalm)
	}
	c.queued = append(c.queued, st)
	return nil
}

// handlerDone counts a handler's end and starts queued ones.
func (c *conn) handlerDone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handlers--
	for len(c.queued) > 0 && c.handlers < int(c.maxStreams) {
		st := c.queued[0]
		c.queued[0] = nil
		c.queued = c.queued[1:]
		if st.removed {
			continue // reset before it started
		}
		c.handlers++
		c.s.workers.run(c, st)
	}
	if len(c.queued) == 0 {
		c.queued = nil
	}
	if c.idle != nil && len(c.streams) == 0 && c.handlers == 0 && !c.closed {
		c.idle.Reset(c.idleTimeout)
	}
}

// runHandler serves one request (on a worker: see workerPool).
func (c *conn) runHandler(st *stream) {
	defer c.handlerDone()
	w := &st.rw
	done := false
	defer func() {
		st.cancel()
		st.body.Close()
		defer w.release()
		if done {
			w.finish()
			return
		}
		e := recover()
		c.resetStream(st.id, http2.ErrCodeInternal, false)
		if e != nil && e != http.ErrAbortHandler {
			buf := make([]byte, 64<<10)
			buf = buf[:runtime.Stack(buf, false)]
			c.s.logger().Error("http2: panic serving request", "remote", c.remote, "panic", e, "stack", string(buf))
		}
	}()
	h := c.handler
	switch {
	case w.truncated:
		h = http.HandlerFunc(headerListTooLong)
	default:
		if err := checkRequestHeaders(st.req.Header); err != nil {
			h = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, err.Error(), http.StatusBadRequest)
			})
		}
	}
	h.ServeHTTP(w, st.req)
	done = true
}

// headerListTooLong answers a request whose header list was over the
// limit (RFC 9113 §10.5.1), as x/net does.
func headerListTooLong(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusRequestHeaderFieldsTooLarge)
	w.Write([]byte("<h1>HTTP Error 431</h1><p>Request Header Field(s) Too Large</p>"))
}
