package h2

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// inflow is a receive window: avail is what the client may still send,
// unsent the credit read by handlers and not yet returned. Credit goes
// back in batches of 4 KiB or more, or when the client's window runs low
// (x/net's inflow).
type inflow struct {
	avail, unsent int32
}

// take consumes n bytes of window, reporting false when the client sent
// more than it was allowed.
func (f *inflow) take(n uint32) bool {
	if n > uint32(f.avail) {
		return false
	}
	f.avail -= int32(n)
	return true
}

// add records n bytes consumed and returns the credit to send now.
func (f *inflow) add(n int) int32 {
	if n <= 0 {
		return 0
	}
	f.unsent += int32(n)
	if f.unsent < 4<<10 && f.unsent < f.avail {
		return 0
	}
	f.avail += f.unsent
	n32 := f.unsent
	f.unsent = 0
	return n32
}

// stream is one request and its response.
type stream struct {
	c      *conn
	id     uint32
	ctx    context.Context
	cancel context.CancelFunc
	req    *http.Request
	rw     responseWriter
	body   requestBody
	// gone is set once the stream is reset or the connection is gone:
	// no frame may be written for it any more.
	gone atomic.Bool

	// Guarded by c.mu.
	sendWindow   int64
	inflow       inflow
	recvEnd      bool // END_STREAM received (half-closed remote)
	sentEnd      bool // END_STREAM sent (half-closed local)
	removed      bool // no longer in c.streams
	gotTrailer   bool
	declLen      int64 // request Content-Length, -1 if none
	recvd        int64 // request body bytes received
	buf          []byte
	off          int
	bodyErr      error // what Read returns once buf is drained
	bodyClosed   bool
	readDeadline time.Time
	trailer      http.Header // request trailers being received

	// dataCh signals body data, end or error (cap 1; nil when the
	// request has no body: nothing reads it). winCh signals send window
	// or the stream's end (cap 1), made under c.mu when a write first
	// has to wait for window (before that a signal has no one to wake).
	// signal on a nil channel does nothing.
	dataCh chan struct{}
	winCh  chan struct{}
}

// signal wakes a goroutine waiting on ch.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// abort ends st for err (c.mu held): writes fail, reads return err.
func (st *stream) abort(err error) {
	st.gone.Store(true)
	if st.bodyErr == nil {
		st.bodyErr = err
	}
	st.cancel()
	signal(st.dataCh)
	signal(st.winCh)
}

// closeStream removes st from the connection (c.mu held).
func (c *conn) closeStream(st *stream) {
	if st.removed {
		return
	}
	st.removed = true
	delete(c.streams, st.id)
	if len(c.streams) > 0 {
		return
	}
	if c.goingAway {
		c.lingerClose()
	} else if c.idle != nil {
		c.idle.Reset(c.idleTimeout)
	}
}

// resetStream sends RST_STREAM for id and ends its stream, if open. A
// handler (not fromReader) resets only its stream while it is open:
// once the client reset it, or both ends ended, it is closed and a
// RST_STREAM would answer the client's (RFC 9113 §5.4.2) and mark the
// stream as one the server reset (see recentlyReset).
func (c *conn) resetStream(id uint32, code http2.ErrCode, fromReader bool) {
	c.mu.Lock()
	if !fromReader && c.streams[id] == nil {
		c.mu.Unlock()
		return
	}
	if code != http2.ErrCodeNo {
		// Only stream errors: after a NO_ERROR reset (an answer sent
		// before the request ended) a client's HEADERS on the stream is
		// the connection error of RFC 9113 §5.1 (h2spec 5.1/9).
		c.resetIDs[c.resetNext%uint32(len(c.resetIDs))] = id
		c.resetNext++
	}
	if st := c.streams[id]; st != nil {
		st.abort(http2.StreamError{StreamID: id, Code: code})
		c.closeStream(st)
	}
	c.mu.Unlock()
	c.writeControl(fromReader, func() error { return c.fw.WriteRSTStream(id, code) })
}

// recentlyReset reports whether the server sent RST_STREAM for id
// lately (one of its last len(resetIDs) resets): frames the client sent
// before it saw the reset are ignored (RFC 9113 §5.1, "closed"), as
// x/net ignores them while its RST_STREAM is queued.
func (c *conn) recentlyReset(id uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.resetIDs {
		if r == id {
			return true
		}
	}
	return false
}

// endStream records the request's END_STREAM (c.mu held).
func (st *stream) endStream() {
	st.recvEnd = true
	err := io.EOF
	if st.declLen != -1 && st.declLen != st.recvd {
		err = fmt.Errorf("request declared a Content-Length of %d but only wrote %d bytes", st.declLen, st.recvd)
	}
	for k, vv := range st.trailer {
		st.req.Trailer[k] = vv
	}
	if st.bodyErr == nil {
		st.bodyErr = err
	}
	signal(st.dataCh)
	if st.sentEnd {
		st.c.closeStream(st)
	}
}

// reserve takes up to want bytes of send window for st, waiting for
// window until the write deadline. It returns at least 1 byte, or an
// error.
func (c *conn) reserve(st *stream, want int, deadline time.Time) (int, error) {
	c.mu.Lock()
	for {
		if st.gone.Load() || c.closed {
			c.mu.Unlock()
			return 0, errStreamClosed
		}
		n := int64(min(want, maxDataWrite))
		n = min(n, c.sendWindow, st.sendWindow)
		if n > 0 {
			c.sendWindow -= n
			st.sendWindow -= n
			c.mu.Unlock()
			return int(n), nil
		}
		if st.winCh == nil {
			st.winCh = make(chan struct{}, 1)
		}
		ch := st.winCh
		c.mu.Unlock()
		if !wait(ch, deadline, c.s.now) {
			c.resetStream(st.id, http2.ErrCodeInternal, false)
			return 0, os.ErrDeadlineExceeded
		}
		c.mu.Lock()
	}
}

// tryReserve is reserve without waiting: it may return 0.
func (c *conn) tryReserve(st *stream, want int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(int64(min(want, maxDataWrite)), c.sendWindow, st.sendWindow)
	if n <= 0 {
		return 0
	}
	c.sendWindow -= n
	st.sendWindow -= n
	return int(n)
}

// wait waits for a signal on ch, or for the deadline (zero: none); it
// reports false when the deadline passed.
func wait(ch chan struct{}, deadline time.Time, now func() time.Time) bool {
	if deadline.IsZero() {
		<-ch
		return true
	}
	d := deadline.Sub(now())
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// addWindow adds n to a send window, reporting false on overflow
// (RFC 9113 §6.9.1).
func addWindow(w *int64, n int64) bool {
	if *w+n > math.MaxInt32 {
		return false
	}
	*w += n
	return true
}

// requestBody is a stream's request body: what the reader buffered,
// read by the handler, with the window returned as it is read.
type requestBody struct {
	st            *stream
	needsContinue bool
}

// Read reads buffered body bytes, waiting for them (until the read
// deadline), and returns the window they used.
func (b *requestBody) Read(p []byte) (int, error) {
	st := b.st
	c := st.c
	if b.needsContinue {
		b.needsContinue = false
		c.writeFrames(st, &respHead{status: 100}, nil, false)
	}
	c.mu.Lock()
	for st.off == len(st.buf) && st.bodyErr == nil {
		dl := st.readDeadline
		c.mu.Unlock()
		ok := wait(st.dataCh, dl, c.s.now)
		c.mu.Lock()
		if !ok && st.off == len(st.buf) && st.bodyErr == nil && st.readDeadline.Equal(dl) {
			st.bodyErr = fmt.Errorf("http2: request body read: %w", os.ErrDeadlineExceeded)
		}
	}
	if st.off == len(st.buf) {
		err := st.bodyErr
		c.mu.Unlock()
		return 0, err
	}
	n := copy(p, st.buf[st.off:])
	st.off += n
	if st.off == len(st.buf) {
		st.buf, st.off = st.buf[:0], 0
	}
	connCredit := c.inflow.add(n)
	var stCredit int32
	if !st.recvEnd {
		stCredit = st.inflow.add(n)
	}
	c.mu.Unlock()
	c.writeWindowUpdates(st.id, connCredit, stCredit, false)
	return n, nil
}

// Close discards the unread body and returns its window to the
// connection; later DATA is discarded as it arrives.
func (b *requestBody) Close() error {
	st := b.st
	c := st.c
	c.mu.Lock()
	if st.bodyClosed {
		c.mu.Unlock()
		return nil
	}
	st.bodyClosed = true
	unread := len(st.buf) - st.off
	st.buf, st.off = nil, 0
	if st.bodyErr == nil {
		st.bodyErr = errClosedBody
	}
	credit := c.inflow.add(unread)
	c.mu.Unlock()
	c.writeWindowUpdates(0, credit, 0, false)
	return nil
}
