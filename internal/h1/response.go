package h1

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// h1response is the http.ResponseWriter of one request.
type h1response struct {
	c   *h1conn
	req *http.Request

	mu          sync.Mutex // serialises 100 Continue with the response head
	wroteHeader bool       // the final status is set
	committed   bool       // the response head is in the write buffer
	continued   bool       // 100 Continue was sent
	expect100   bool
	status      int
	cl          int64 // Content-Length set by the handler, or -1
	written     int64 // body bytes the handler wrote
	chunked     bool
	closeAfter  bool
	bodyOK      bool     // the status allows a body
	isHead      bool     // HEAD: the body is counted, not sent
	hasType     bool     // Content-Type set (or Content-Encoding)
	hasDate     bool     // Date set
	hasTE       bool     // Transfer-Encoding set by the handler
	connHdr     []string // the handler's Connection header
	trailers    []string // declared trailer names
	hasPrefixed bool     // http.TrailerPrefix keys set at WriteHeader
}

// Header returns the response header map.
func (w *h1response) Header() http.Header { return w.c.header }

// WriteHeader sends an informational (1xx) head at once, or sets the
// final status; a second final status is ignored.
func (w *h1response) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	c := w.c
	if code < 200 && code != http.StatusSwitchingProtocols {
		if !w.req.ProtoAtLeast(1, 1) {
			return
		}
		w.mu.Lock()
		c.hdr = c.hdr[:0]
		for k, vv := range c.header {
			c.hdr = appendHeader(c.hdr, k, vv)
		}
		w.writeStatusLine(code)
		c.bw.Write(c.hdr)
		c.bw.WriteString("\r\n")
		c.bw.Flush()
		w.mu.Unlock()
		return
	}
	w.wroteHeader, w.status = true, code
	w.isHead = w.req.Method == http.MethodHead
	w.bodyOK = code != http.StatusNoContent && code != http.StatusNotModified && code >= 200
	c.hdr = c.hdr[:0]
	for k, vv := range c.header {
		switch k {
		case "Content-Length":
			if !w.bodyOK || len(vv) == 0 {
				continue
			}
			v, err := strconv.ParseInt(strings.TrimSpace(vv[0]), 10, 64)
			if err != nil || v < 0 {
				c.s.Logger.Warn("http1: invalid Content-Length from handler", "value", vv[0])
				continue
			}
			w.cl = v
			continue
		case "Transfer-Encoding":
			w.hasTE = len(vv) > 0 && w.bodyOK
			continue
		case "Connection":
			w.connHdr = vv
			continue
		case "Trailer":
			w.trailers = vv
		case "Content-Type":
			if code == http.StatusNotModified {
				continue
			}
			w.hasType = true
		case "Content-Encoding":
			w.hasType = w.hasType || (len(vv) > 0 && vv[0] != "")
		case "Date":
			w.hasDate = true
		}
		if strings.HasPrefix(k, http.TrailerPrefix) {
			w.hasPrefixed = true
			continue
		}
		c.hdr = appendHeader(c.hdr, k, vv)
	}
}

// appendHeader appends "k: v\r\n" for each value, skipping invalid names
// and turning CR and LF in values into spaces (as net/http does).
func appendHeader(b []byte, k string, vv []string) []byte {
	if !isToken(k) {
		return b
	}
	for _, v := range vv {
		b = append(b, k...)
		b = append(b, ": "...)
		start := len(b)
		b = append(b, strings.TrimSpace(v)...)
		for i := start; i < len(b); i++ {
			if b[i] == '\r' || b[i] == '\n' {
				b[i] = ' '
			}
		}
		b = append(b, "\r\n"...)
	}
	return b
}

// writeStatusLine writes the status line for code.
func (w *h1response) writeStatusLine(code int) {
	bw := w.c.bw
	if w.req.ProtoAtLeast(1, 1) {
		if code == http.StatusOK {
			bw.WriteString("HTTP/1.1 200 OK\r\n")
			return
		}
		bw.WriteString("HTTP/1.1 ")
	} else {
		bw.WriteString("HTTP/1.0 ")
	}
	bw.WriteString(Code3(code))
	bw.WriteByte(' ')
	if text := http.StatusText(code); text != "" {
		bw.WriteString(text)
	} else {
		bw.WriteString("status code " + Code3(code))
	}
	bw.WriteString("\r\n")
}

// commit writes the response head, choosing the body framing; first is
// the start of the body (for Content-Type sniffing) and final says the
// handler is done, so a held-back body's length is known.
func (w *h1response) commit(first []byte, final bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.committed = true
	c, r := w.c, w.req
	trailers := len(w.trailers) > 0 || w.hasPrefixed
	if final && w.cl < 0 && w.bodyOK && !trailers && !w.hasTE && (!w.isHead || w.written > 0) {
		w.cl = w.written
	}
	w.closeAfter = r.Close || c.s.shutdown.Load() || Listed(w.connHdr, "close")
	if w.expect100 && !w.continued {
		w.closeAfter = true
	}
	is11 := r.ProtoAtLeast(1, 1)
	switch {
	case w.isHead || !w.bodyOK:
	case w.cl >= 0:
	case is11:
		w.chunked = true
	default:
		w.closeAfter = true // HTTP/1.0: the body ends with the connection
	}
	if !is11 && !w.isHead && w.bodyOK && w.cl < 0 {
		w.closeAfter = true
	}

	w.writeStatusLine(w.status)
	bw := c.bw
	bw.Write(c.hdr)
	if !w.hasDate {
		bw.WriteString("Date: ")
		bw.Write(c.httpDate())
		bw.WriteString("\r\n")
	}
	if w.bodyOK && !w.hasType && !w.hasTE && len(first) > 0 {
		bw.WriteString("Content-Type: ")
		bw.WriteString(http.DetectContentType(first))
		bw.WriteString("\r\n")
	}
	if w.cl >= 0 && w.bodyOK {
		bw.WriteString("Content-Length: ")
		c.hdr = strconv.AppendInt(c.hdr[:0], w.cl, 10)
		bw.Write(c.hdr)
		bw.WriteString("\r\n")
	}
	if w.chunked {
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	switch {
	case w.closeAfter && w.status != http.StatusSwitchingProtocols:
		if is11 {
			bw.WriteString("Connection: close\r\n")
		}
	case len(w.connHdr) > 0:
		c.hdr = appendHeader(c.hdr[:0], "Connection", w.connHdr)
		bw.Write(c.hdr)
	case !is11:
		bw.WriteString("Connection: keep-alive\r\n")
	}
	bw.WriteString("\r\n")
}

// httpDate returns the current Date header value, formatted once a
// second per connection.
func (c *h1conn) httpDate() []byte {
	now := time.Now()
	if s := now.Unix(); s != c.dsec || c.date == nil {
		c.dsec = s
		c.date = now.UTC().AppendFormat(c.date[:0], http.TimeFormat)
	}
	return c.date
}

// sendContinue answers "Expect: 100-continue" once, unless the response
// head went out first.
func (w *h1response) sendContinue() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.continued || w.committed {
		return
	}
	w.continued = true
	w.c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
	w.c.bw.Flush()
}

// Write sends body bytes, framed per the response head; a response
// without Content-Length holds back its first 2 KiB, hoping to learn the
// length.
func (w *h1response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.bodyOK {
		return 0, http.ErrBodyNotAllowed
	}
	c := w.c
	if c.failed.Load() {
		return 0, ErrClientGone
	}
	var err error
	if w.cl >= 0 && w.written+int64(len(p)) > w.cl {
		p, err = p[:w.cl-w.written], http.ErrContentLength
	}
	w.written += int64(len(p))
	if !w.committed {
		if w.cl < 0 && w.written <= h1BufferBeforeChunking {
			if !w.isHead {
				c.body = append(c.body, p...)
			}
			return len(p), err
		}
		if len(c.body) > 0 {
			w.commit(c.body, false)
			w.writeBody(c.body)
			c.body = c.body[:0]
		} else {
			w.commit(p, false)
		}
	}
	w.writeBody(p)
	if c.failed.Load() {
		return 0, ErrClientGone
	}
	return len(p), err
}

// writeBody writes p with the chosen framing.
func (w *h1response) writeBody(p []byte) {
	if len(p) == 0 || w.isHead {
		return
	}
	bw := w.c.bw
	if w.chunked {
		var nb [16]byte
		bw.Write(strconv.AppendInt(nb[:0], int64(len(p)), 16))
		bw.WriteString("\r\n")
		bw.Write(p)
		bw.WriteString("\r\n")
		return
	}
	bw.Write(p)
}

// Flush sends the head and what was written so far.
func (w *h1response) Flush() { _ = w.FlushError() }

// FlushError is Flush reporting a write error (for
// http.ResponseController).
func (w *h1response) FlushError() error {
	w.commitHeld(false)
	if err := w.c.bw.Flush(); err != nil {
		return fmt.Errorf("flush response: %w", err)
	}
	return nil
}

// commitHeld writes the head, once (200 if the handler wrote none), and
// the body held back so far; final says the handler is done.
func (w *h1response) commitHeld(final bool) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if c := w.c; !w.committed {
		w.commit(c.body, final)
		w.writeBody(c.body)
		c.body = c.body[:0]
	}
}

// SetWriteDeadline bounds the writes of the rest of the response (for
// http.ResponseController): a write still blocked at t, within
// h1WriteSlack, fails, which ends the response and closes the
// connection. The zero time removes the bound. It lasts until the
// response is finished; the next request starts without one.
func (w *h1response) SetWriteDeadline(t time.Time) error {
	var ns int64
	if !t.IsZero() {
		ns = max(t.UnixNano(), 1)
	}
	w.c.wdl.Store(ns)
	return nil
}

// SetReadDeadline bounds the reads of the request body (for
// http.ResponseController), which have no deadline otherwise: a read
// still blocked at t fails with a timeout error (wrapping
// os.ErrDeadlineExceeded), after which the body is broken and the
// connection is closed once the response is written, without draining
// it. The zero time removes the bound. It lasts until the handler
// returns (the loop sets its own deadlines then) and must be called
// while the handler runs. Once the body has been read to its end it is
// ignored: a client watch may then be reading the connection, and no
// body read is left to bound.
func (w *h1response) SetReadDeadline(t time.Time) error {
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bodyDone || c.watching || c.hijacked {
		return nil
	}
	c.setReadDeadline(t)
	return nil
}

// EnableFullDuplex is a no-op: the body can always be read while the
// response is written.
func (w *h1response) EnableFullDuplex() error { return nil }

// finish completes the response after the handler returned.
func (w *h1response) finish() {
	w.commitHeld(true)
	c := w.c
	if w.cl >= 0 && w.bodyOK && !w.isHead && w.written != w.cl {
		w.closeAfter = true // short body: the client sees it end
	}
	if !w.chunked {
		return
	}
	bw := c.bw
	bw.WriteString("0\r\n")
	c.hdr = c.hdr[:0]
	for _, v := range w.trailers {
		for k := range strings.SplitSeq(v, ",") {
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			if vv := c.header[k]; k != "" && len(vv) > 0 {
				c.hdr = appendHeader(c.hdr, k, vv)
			}
		}
	}
	for k, vv := range c.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			c.hdr = appendHeader(c.hdr, http.CanonicalHeaderKey(name), vv)
		}
	}
	bw.Write(c.hdr)
	bw.WriteString("\r\n")
}

// Hijack hands the connection to the handler, with a reader holding any
// bytes the client already sent after the request.
func (w *h1response) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c := w.c
	c.timer.Stop()
	c.mu.Lock()
	if c.hijacked {
		c.mu.Unlock()
		return nil, nil, http.ErrHijacked
	}
	c.hijacked = true
	c.mu.Unlock()
	c.stopWatch()
	c.s.forget(c)
	if c.src.hasByte {
		if _, err := c.br.Peek(c.br.Buffered() + 1); err != nil {
			c.rwc.Close() // nobody owns the connection any more
			return nil, nil, fmt.Errorf("hijack: buffered byte: %w", err)
		}
	}
	if w.wroteHeader && !w.committed {
		w.commit(c.body, false)
		w.writeBody(c.body)
		c.body = c.body[:0]
	}
	if err := c.bw.Flush(); err != nil {
		c.rwc.Close() // nobody owns the connection any more
		return nil, nil, fmt.Errorf("hijack: %w", err)
	}
	c.rwc.SetDeadline(time.Time{})
	return c.rwc, bufio.NewReadWriter(c.br, c.bw), nil
}
