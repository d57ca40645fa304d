package h1

import (
	"bufio"
	"net/http"
	"sync"
)

// connBuffers pools what a connection needs only while it serves a
// request: its 16 KiB reader, 8 KiB writer, response header map and
// scratch slices (connSet). A cleartext keep-alive connection gives its
// set back while it waits for its next request, as nginx and HAProxy
// release their buffers, so an idle client costs a few KiB rather than
// about 25 (docs/performance.md, "Idle connections").
type connBuffers struct {
	sets, chunks sync.Pool
}

// connSet is one connection's request-time state; see connBuffers.
type connSet struct {
	br        *bufio.Reader
	bw        *bufio.Writer
	header    http.Header
	hdr, body []byte
}

// takeBuffers gives c a set.
func (c *h1conn) takeBuffers() {
	set, _ := c.s.bufs.sets.Get().(*connSet)
	if set == nil {
		set = &connSet{
			br:     bufio.NewReaderSize(&c.src, h1ReadBuf),
			bw:     bufio.NewWriterSize(h1sink{c}, h1WriteBuf),
			header: make(http.Header, 16),
		}
	} else {
		set.br.Reset(&c.src)
		set.bw.Reset(h1sink{c})
	}
	c.set = set
	c.br, c.bw, c.header, c.hdr, c.body = set.br, set.bw, set.header, set.hdr, set.body
}

// giveBuffers returns c's set, emptied, to the pool. Nothing may still
// read through the reader: a request body left behind by its handler
// stops at its end (h1body.eof) or was closed, and a connection whose
// body did not end is not kept. The header map is cleared so that it
// does not keep the last response's values alive.
func (c *h1conn) giveBuffers() {
	set := c.set
	set.br.Reset(nil)
	set.bw.Reset(nil)
	clear(c.header)
	set.hdr, set.body = c.hdr[:0], c.body[:0]
	c.s.bufs.sets.Put(set)
	c.set, c.br, c.bw, c.header, c.hdr, c.body = nil, nil, nil, nil, nil, nil
}

// chunk returns a pooled read buffer the size of a connection's reader.
func (b *connBuffers) chunk() *[]byte {
	if p, _ := b.chunks.Get().(*[]byte); p != nil {
		return p
	}
	p := make([]byte, h1ReadBuf)
	return &p
}

// awaitRequest waits for the first byte of the next request (false: the
// client closed, the idle or header deadline passed, or the server
// closed the connection). A cleartext connection, its first request
// included, waits on its socket with its set given back, and reads what
// arrives into a pooled chunk that c.src hands to the reader first, so
// that a silent client holds no buffers; without a socket to wait on
// (TLS), it waits in c.br. One that waits ParkAfter is parked
// (park.go), under the header deadline before its first request.
func (c *h1conn) awaitRequest() waitResult {
	if c.raw == nil || c.src.hasByte || len(c.src.pend) > 0 {
		// Bytes taken off the socket earlier (by a client watch, or a
		// chunk the reader had no room for) come first, and need no wait.
		return peeked(c.br)
	}
	if c.set != nil { // not when woken from the lot: given back then
		c.giveBuffers()
	}
	for {
		got, nudged := c.readIdle()
		if got {
			break
		}
		if !nudged {
			return waitClosed
		}
		if c.park() {
			return waitParked
		}
		c.setReadDeadline(c.rdl) // not parked: wait here, the nudge undone
	}
	c.takeBuffers()
	// Into the reader, so that the request head is seen buffered.
	return peeked(c.br)
}

// peeked waits for one byte in br.
func peeked(br *bufio.Reader) waitResult {
	if _, err := br.Peek(1); err != nil {
		return waitClosed
	}
	return waitRequest
}
