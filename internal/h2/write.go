package h2

import (
	"runtime"
	"strconv"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// maxDataFrame is the largest DATA frame written: the protocol's
// minimum SETTINGS_MAX_FRAME_SIZE, which every client accepts.
const maxDataFrame = 16 << 10

// maxDataWrite is how much DATA one write (one lock) may carry.
const maxDataWrite = 4 * maxDataFrame

// lockWrite takes the write lock, counting the caller as a pending
// writer from before it waits, so that the holder does not flush when
// another writer is about to add frames.
func (c *conn) lockWrite() {
	c.pending.Add(1)
	c.wmu.Lock()
}

// unlockWrite releases the write lock, flushing when no other writer
// is pending. The reader (fromReader) also leaves the flush for later
// when it has another whole frame buffered: flushBeforeRead does it.
func (c *conn) unlockWrite(fromReader bool) {
	if c.pending.Add(-1) == 0 {
		if fromReader && c.frameBuffered() {
			c.dirty.Store(true)
		} else {
			c.flushLocked()
		}
	}
	c.wmu.Unlock()
}

// flushLocked writes the buffered frames out (wmu held).
func (c *conn) flushLocked() {
	c.dirty.Store(false)
	if c.ws == nil {
		return
	}
	if c.werr == nil && c.ws.bw.Buffered() > 0 {
		if err := c.ws.bw.Flush(); err != nil {
			c.werr = err
			c.nc.Close()
		}
	}
	c.giveWriteSet()
}

// frameBuffered reports whether a whole frame is buffered to read
// (reader only).
func (c *conn) frameBuffered() bool {
	n := c.br.Buffered()
	if n < 9 {
		return false
	}
	h, err := c.br.Peek(3)
	if err != nil {
		return false
	}
	return n >= 9+int(h[0])<<16|int(h[1])<<8|int(h[2])
}

// flushBeforeRead flushes what the reader left unflushed before it may
// block reading.
func (c *conn) flushBeforeRead() {
	if c.dirty.Load() && !c.frameBuffered() {
		c.lockWrite()
		c.unlockWrite(false)
	}
}

// writeControl writes one control frame with fn under the write lock.
func (c *conn) writeControl(fromReader bool, fn func() error) {
	c.lockWrite()
	if c.werr == nil {
		if err := fn(); err != nil {
			c.werr = err
		}
	}
	c.unlockWrite(fromReader)
}

// writeGoAway writes GOAWAY, flushed: the connection may close next.
func (c *conn) writeGoAway(last uint32, code http2.ErrCode) {
	c.writeControl(false, func() error { return c.fw.WriteGoAway(last, code, nil) })
}

// writeWindowUpdates returns receive window to the client: conn bytes
// for the connection, st bytes for stream id.
func (c *conn) writeWindowUpdates(id uint32, conn, st int32, fromReader bool) {
	if conn <= 0 && st <= 0 {
		return
	}
	c.writeControl(fromReader, func() error {
		if conn > 0 {
			if err := c.fw.WriteWindowUpdate(0, uint32(conn)); err != nil {
				return err
			}
		}
		if st > 0 {
			return c.fw.WriteWindowUpdate(id, uint32(st))
		}
		return nil
	})
}

// respHead is a header block to send: a response head (status != 0)
// or trailers.
type respHead struct {
	status int
	fields []hpack.HeaderField
	ctype  string // computed Content-Type, if any
	clen   string // Content-Length, if any
	date   string // Date, if any
}

// encode HPACK-encodes h into the write set's hbuf (wmu held).
func (c *conn) encode(h *respHead) {
	ws := c.writeSet()
	ws.hbuf = ws.hbuf[:0]
	if h.status != 0 {
		c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: statusString(h.status)})
	}
	for _, f := range h.fields {
		c.henc.WriteField(f)
	}
	if h.ctype != "" {
		c.henc.WriteField(hpack.HeaderField{Name: "content-type", Value: h.ctype})
	}
	if h.clen != "" {
		c.henc.WriteField(hpack.HeaderField{Name: "content-length", Value: h.clen})
	}
	if h.date != "" {
		c.henc.WriteField(hpack.HeaderField{Name: "date", Value: h.date})
	}
}

// statusString is strconv.Itoa without an allocation for the common
// codes.
func statusString(code int) string {
	switch code {
	case 200:
		return "200"
	case 204:
		return "204"
	case 206:
		return "206"
	case 301:
		return "301"
	case 302:
		return "302"
	case 304:
		return "304"
	case 400:
		return "400"
	case 404:
		return "404"
	case 500:
		return "500"
	case 502:
		return "502"
	case 503:
		return "503"
	}
	return strconv.Itoa(code)
}

// writeHeaderBlock writes the encoded block (hbuf) as HEADERS and CONTINUATION frames
// (wmu held).
func (c *conn) writeHeaderBlock(id uint32, endStream bool) error {
	b := c.ws.hbuf
	frag := b[:min(len(b), maxDataFrame)]
	b = b[len(frag):]
	err := c.fw.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndStream: endStream, EndHeaders: len(b) == 0})
	for err == nil && len(b) > 0 {
		frag = b[:min(len(b), maxDataFrame)]
		b = b[len(frag):]
		err = c.fw.WriteContinuation(id, len(b) == 0, frag)
	}
	return err
}

// writeFrames writes, for st, the header block h (if set) and data as
// DATA frames, END_STREAM on the last frame when end. The caller holds
// the send window for data. A stream whose request has ended closes
// before its END_STREAM is flushed: a client that reads the response
// and at once sends on the stream again must find it closed (RFC 9113
// §5.1), not half-closed.
func (c *conn) writeFrames(st *stream, h *respHead, data []byte, end bool) error {
	c.lockWrite()
	err := c.writeFramesLocked(st, h, data, end)
	others := false
	if err == nil && end {
		c.mu.Lock()
		st.sentEnd = true
		if st.recvEnd {
			c.closeStream(st)
		}
		others = c.handlers > 1
		c.mu.Unlock()
	}
	if others && c.pending.Load() == 1 {
		// Other streams' handlers run: let those the same poll woke
		// queue their frames behind this lock, so that one write
		// carries them all (the last writer flushes).
		runtime.Gosched()
	}
	c.unlockWrite(false)
	return err
}

// writeFramesLocked is writeFrames with wmu held.
func (c *conn) writeFramesLocked(st *stream, h *respHead, data []byte, end bool) error {
	if c.werr != nil {
		return errClientDisconnected
	}
	if st.gone.Load() {
		return errStreamClosed
	}
	if h != nil {
		c.encode(h)
		if err := c.writeHeaderBlock(st.id, end && len(data) == 0); err != nil {
			c.werr = err
			return errClientDisconnected
		}
		if len(data) == 0 {
			return nil
		}
	}
	for {
		n := min(len(data), maxDataFrame)
		if err := c.writeData(st.id, end && n == len(data), data[:n]); err != nil {
			c.werr = err
			return errClientDisconnected
		}
		data = data[n:]
		if len(data) == 0 {
			return nil
		}
	}
}
