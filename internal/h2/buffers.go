package h2

import (
	"bufio"
	"encoding/binary"
	"io"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// bigReadFrame is the frame length above which the read Framer's
// payload buffer (which x/net keeps at the largest frame read) is
// dropped, by replacing the Framer, before the connection waits idle.
const bigReadFrame = 4 << 10

// connBuffers pools what a connection needs only while it has bytes to
// read or to write: its 16 KiB frame reader, and its 32 KiB frame
// writer with the HPACK scratch (writeSet). An idle connection holds
// neither: the reader waits for the client's next byte with a 1-byte
// read and takes a reader when it comes; a writer goes back once a
// flush leaves nothing buffered and no other writer is pending. So an
// idle HTTP/2 connection costs a few KiB rather than about 50
// (docs/performance.md, "Idle connections").
//
// bodies pools the handlers' response body buffers (handlerBufSize),
// each held from a handler's first Write until it returned and its
// response was sent (responseWriter.release).
type connBuffers struct {
	readers, writers, bodies sync.Pool
}

// body returns a pooled response body buffer.
func (b *connBuffers) body() *[]byte {
	if p, _ := b.bodies.Get().(*[]byte); p != nil {
		return p
	}
	p := make([]byte, 0, handlerBufSize)
	return &p
}

// writeSet is the write side's pooled state: the buffered writer and
// the header block being encoded.
type writeSet struct {
	bw   *bufio.Writer
	hbuf []byte
}

// connSource is what the frame reader reads: the byte awaitFrame read
// while the reader was away, then the connection.
type connSource struct {
	c   *conn
	has bool
	b   [1]byte
}

func (s *connSource) Read(p []byte) (int, error) {
	if s.has && len(p) > 0 {
		p[0], s.has = s.b[0], false
		return 1, nil
	}
	return s.c.nc.Read(p) //nolint:wrapcheck // io.EOF must stay io.EOF
}

// frameReader is the read Framer's reader: the connection's current
// frame reader (reader goroutine only).
type frameReader struct{ c *conn }

func (r frameReader) Read(p []byte) (int, error) { return r.c.br.Read(p) } //nolint:wrapcheck // as read

// frameWriter is the write Framer's writer: the connection's buffered
// writer, taken on demand (wmu held).
type frameWriter struct{ c *conn }

func (w frameWriter) Write(p []byte) (int, error) { return w.c.writer().Write(p) } //nolint:wrapcheck // as written

// hpackSink is the HPACK encoder's output: the write set's header
// block scratch (wmu held).
type hpackSink struct{ c *conn }

func (h hpackSink) Write(p []byte) (int, error) {
	ws := h.c.writeSet()
	ws.hbuf = append(ws.hbuf, p...)
	return len(p), nil
}

// takeReader gives the reader goroutine a frame reader.
func (c *conn) takeReader() {
	br, _ := c.s.bufs.readers.Get().(*bufio.Reader)
	if br == nil {
		br = bufio.NewReaderSize(&c.src, readBufSize)
	} else {
		br.Reset(&c.src)
	}
	c.br = br
}

// giveReader returns the frame reader, which must have nothing
// buffered.
func (c *conn) giveReader() {
	c.br.Reset(nil)
	c.s.bufs.readers.Put(c.br)
	c.br = nil
}

// awaitFrame waits, holding no buffer, for the client's next byte, and
// takes a reader that returns it first. It returns the read error.
func (c *conn) awaitFrame() error {
	c.giveReader()
	if c.bigRead {
		c.bigRead = false
		c.fr = c.newReadFramer(c.fr.ReadMetaHeaders)
	}
	n, err := c.nc.Read(c.src.b[:])
	c.takeReader()
	if n == 1 {
		c.src.has = true
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// newReadFramer returns a Framer reading frames through c.br, with the
// connection's HPACK decoder.
func (c *conn) newReadFramer(dec *hpack.Decoder) *http2.Framer {
	fr := http2.NewFramer(nil, frameReader{c})
	fr.SetMaxReadFrameSize(or32(c.s.MaxReadFrameSize, DefaultMaxReadFrameSize))
	fr.MaxHeaderListSize = c.maxHeaderListSize()
	fr.ReadMetaHeaders = dec
	return fr
}

// writeSet returns the connection's write set, taking one (wmu held).
func (c *conn) writeSet() *writeSet {
	if c.ws == nil {
		ws, _ := c.s.bufs.writers.Get().(*writeSet)
		if ws == nil {
			ws = &writeSet{bw: bufio.NewWriterSize(c.nc, writeBufSize)}
		} else {
			ws.bw.Reset(c.nc)
		}
		c.ws = ws
	}
	return c.ws
}

// writer returns the connection's buffered writer (wmu held).
func (c *conn) writer() *bufio.Writer { return c.writeSet().bw }

// giveWriteSet returns the write set, discarding what it holds (wmu
// held; flushLocked flushed it first).
func (c *conn) giveWriteSet() {
	ws := c.ws
	if ws == nil {
		return
	}
	ws.bw.Reset(nil)
	if cap(ws.hbuf) > writeBufSize {
		ws.hbuf = nil
	}
	ws.hbuf = ws.hbuf[:0]
	c.s.bufs.writers.Put(ws)
	c.ws = nil
}

// writeData writes one DATA frame straight into the buffered writer,
// not through the Framer, whose frame buffer would otherwise copy the
// payload once more and keep the largest frame's size (wmu held).
func (c *conn) writeData(id uint32, end bool, data []byte) error {
	h := &c.dataHdr
	h[0], h[1], h[2] = byte(len(data)>>16), byte(len(data)>>8), byte(len(data))
	h[3], h[4] = byte(http2.FrameData), 0
	if end {
		h[4] = byte(http2.FlagDataEndStream)
	}
	binary.BigEndian.PutUint32(h[5:], id&(1<<31-1))
	bw := c.writer()
	if _, err := bw.Write(h[:]); err != nil {
		return err //nolint:wrapcheck // the connection's error
	}
	_, err := bw.Write(data)
	return err //nolint:wrapcheck // the connection's error
}
