package h2

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2/hpack"
)

var errTooLong = errors.New("http2: handler wrote more than declared Content-Length")

// responseWriter is a stream's http.ResponseWriter, with http.Flusher
// and what http.ResponseController uses (SetReadDeadline,
// SetWriteDeadline, EnableFullDuplex). Only the handler's goroutine
// uses it.
type responseWriter struct {
	st        *stream
	header    http.Header
	truncated bool // the request's header list was over the limit

	status      int
	wroteHeader bool // WriteHeader called for a final status
	sentHeader  bool // the response HEADERS frame is written
	endSent     bool // END_STREAM is written
	isHead      bool
	head        respHead // the snapshot taken at WriteHeader
	hasCType    bool     // the handler set Content-Type (maybe nil)
	hasCE       bool     // a non-empty Content-Encoding
	hasDate     bool
	declLen     int64 // the handler's Content-Length, -1 if none
	written     int64
	buf         []byte // the body held back, in *bufp (pooled; see body)
	bufp        *[]byte
	trailers    []string             // declared trailer names, canonical
	fieldArr    [8]hpack.HeaderField // head.fields' first backing array
	wdeadline   time.Time
}

func (w *responseWriter) init(st *stream, truncated bool) {
	w.st = st
	w.truncated = truncated
	w.header = make(http.Header)
	w.isHead = st.req.Method == http.MethodHead
	w.declLen = -1
	w.head.fields = w.fieldArr[:0]
}

// body makes w.buf a pooled buffer of handlerBufSize capacity, which
// every append to it fits in.
func (w *responseWriter) body() {
	if w.bufp == nil {
		w.bufp = w.st.c.s.bufs.body()
		w.buf = (*w.bufp)[:0]
	}
}

// release gives the body buffer back once the handler has returned and
// finish has sent what it held: only the handler's goroutine (and then
// finish, on the same goroutine) touches w.buf, and a ResponseWriter
// may not be used after its handler returned. A stray Write after that
// would start from nil, not from a buffer another stream owns.
func (w *responseWriter) release() {
	if w.bufp == nil {
		return
	}
	*w.bufp = w.buf[:0]
	w.st.c.s.bufs.bodies.Put(w.bufp)
	w.buf, w.bufp = nil, nil
}

// Header returns the response header map.
func (w *responseWriter) Header() http.Header { return w.header }

// WriteHeader sends an informational (1xx) head at once, and snapshots
// the header for a final status, as net/http's servers do.
func (w *responseWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if w.wroteHeader {
		return
	}
	if code < 200 {
		var fields []hpack.HeaderField
		for k, vv := range w.header {
			fields = w.appendFields(fields, k, vv)
		}
		sortFields(fields)
		w.st.c.writeFrames(w.st, &respHead{status: code, fields: fields}, nil, false)
		return
	}
	w.wroteHeader = true
	w.status = code
	w.head = respHead{status: code, fields: w.snapshot(w.head.fields[:0])}
}

// snapshot returns the header's fields as they go out: lower-case,
// valid, without connection-specific fields, sorted by name; it notes
// the fields that shape the head (Content-Length, Content-Type, Date,
// Trailer, Connection: close).
func (w *responseWriter) snapshot(fields []hpack.HeaderField) []hpack.HeaderField {
	for k, vv := range w.header {
		switch k {
		case "Content-Length":
			if len(vv) > 0 {
				if cl, err := strconv.ParseUint(vv[0], 10, 63); err == nil {
					w.declLen = int64(cl)
					w.head.clen = vv[0]
				}
			}
			continue
		case "Content-Type":
			w.hasCType = true
		case "Content-Encoding":
			w.hasCE = len(vv) > 0 && vv[0] != ""
		case "Date":
			w.hasDate = true
		case "Trailer":
			for _, v := range vv {
				for name := range strings.SplitSeq(v, ",") {
					w.declareTrailer(name)
				}
			}
		case "Connection":
			if vv0(vv) == "close" {
				go w.st.c.startGracefulShutdown()
			}
			continue
		}
		fields = w.appendFields(fields, k, vv)
	}
	sortFields(fields)
	return fields
}

// sortFields sorts fields by name, keeping the order of a name's values.
func sortFields(fields []hpack.HeaderField) {
	slices.SortStableFunc(fields, func(a, b hpack.HeaderField) int { return strings.Compare(a.Name, b.Name) })
}

func vv0(vv []string) string {
	if len(vv) == 0 {
		return ""
	}
	return vv[0]
}

// appendFields appends a header's values under its wire name, leaving
// out what HTTP/2 cannot carry.
func (w *responseWriter) appendFields(fields []hpack.HeaderField, k string, vv []string) []hpack.HeaderField {
	name := w.st.c.fields.lowerKey(k)
	if name == "" || !httpguts.ValidHeaderFieldName(name) {
		return fields
	}
	switch name {
	case "keep-alive", "proxy-connection", "upgrade":
		return fields
	}
	for _, v := range vv {
		if !httpguts.ValidHeaderFieldValue(v) || name == "transfer-encoding" && v != "trailers" {
			continue
		}
		fields = append(fields, hpack.HeaderField{Name: name, Value: v})
	}
	return fields
}

// declareTrailer adds a trailer name, as net/http's servers do.
func (w *responseWriter) declareTrailer(k string) {
	k = http.CanonicalHeaderKey(strings.TrimSpace(k))
	if !httpguts.ValidTrailerHeader(k) || slices.Contains(w.trailers, k) {
		return
	}
	w.trailers = append(w.trailers, k)
}

// Write buffers or sends body bytes.
func (w *responseWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.declLen >= 0 && w.written > w.declLen {
		return 0, errTooLong
	}
	if w.isHead {
		return len(p), nil
	}
	if w.st.gone.Load() {
		return 0, errStreamClosed
	}
	if len(w.buf)+len(p) <= handlerBufSize {
		w.body()
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	if err := w.sendBuffered(false); err != nil {
		return 0, err
	}
	if len(p) < handlerBufSize {
		w.body()
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	if err := w.send(p, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteString is Write for a string.
func (w *responseWriter) WriteString(s string) (int, error) {
	if len(w.buf)+len(s) <= handlerBufSize && w.wroteHeader && !w.isHead && bodyAllowed(w.status) &&
		(w.declLen < 0 || w.written+int64(len(s)) <= w.declLen) {
		w.written += int64(len(s))
		w.body()
		w.buf = append(w.buf, s...)
		return len(s), nil
	}
	return w.Write([]byte(s))
}

// sendBuffered sends the buffered body.
func (w *responseWriter) sendBuffered(end bool) error {
	err := w.send(w.buf, end)
	w.buf = w.buf[:0]
	return err
}

// send writes p (the head first, if not yet sent), END_STREAM with the
// last frame when end.
func (w *responseWriter) send(p []byte, end bool) error {
	st := w.st
	c := st.c
	var h *respHead
	if !w.sentHeader {
		w.sentHeader = true
		h = w.finalHead(p, end)
		if w.isHead || end && len(p) == 0 {
			end = true
			p = nil
		}
	}
	if h != nil {
		n := c.tryReserve(st, len(p))
		if err := c.writeFrames(st, h, p[:n], end && n == len(p)); err != nil {
			return err
		}
		p = p[n:]
		if len(p) == 0 {
			w.endSent = end
			return nil
		}
	} else if len(p) == 0 {
		if end {
			w.endSent = true
			return c.writeFrames(st, nil, nil, true)
		}
		return nil
	}
	for len(p) > 0 {
		n, err := c.reserve(st, len(p), w.wdeadline)
		if err != nil {
			return err
		}
		if err := c.writeFrames(st, nil, p[:n], end && n == len(p)); err != nil {
			return err
		}
		p = p[n:]
	}
	w.endSent = end
	return nil
}

// finalHead completes the head for the first body bytes p: Content-Type
// sniffed, Content-Length when the handler is done (end), Date.
func (w *responseWriter) finalHead(p []byte, end bool) *respHead {
	h := &w.head
	if h.clen == "" && end && bodyAllowed(w.status) && (len(p) > 0 || !w.isHead) {
		h.clen = strconv.Itoa(len(p))
	}
	if !w.hasCE && !w.hasCType && bodyAllowed(w.status) && len(p) > 0 {
		h.ctype = http.DetectContentType(p)
	}
	if !w.hasDate {
		h.date = w.st.c.s.httpDate()
	}
	return h
}

// Flush sends the head and the buffered body.
func (w *responseWriter) Flush() { w.FlushError() }

// FlushError is Flush, returning the write error.
func (w *responseWriter) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.endSent {
		return nil
	}
	if w.isHead && w.sentHeader {
		return nil
	}
	return w.sendBuffered(false)
}

// finish ends the response after the handler returned: the rest of the
// body, then trailers, END_STREAM; then the stream closes (with
// RST_STREAM NO_ERROR when the client was still sending, RFC 9113 §8.1).
func (w *responseWriter) finish() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.promoteTrailers()
	trailers := w.trailerFields()
	if !w.endSent {
		if err := w.sendBuffered(len(trailers) == 0); err != nil {
			return
		}
		if len(trailers) > 0 && !w.endSent {
			if w.st.c.writeFrames(w.st, &respHead{fields: trailers}, nil, true) != nil {
				return
			}
			w.endSent = true
		}
	}
	w.st.c.sentEnd(w.st)
}

// promoteTrailers declares the "Trailer:"-prefixed header keys as
// trailers (http.TrailerPrefix).
func (w *responseWriter) promoteTrailers() {
	for k, vv := range w.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			w.declareTrailer(name)
			w.header[http.CanonicalHeaderKey(name)] = vv
		}
	}
	slices.Sort(w.trailers)
}

// trailerFields returns the declared trailers that have values.
func (w *responseWriter) trailerFields() []hpack.HeaderField {
	var fields []hpack.HeaderField
	for _, k := range w.trailers {
		if vv := w.header[k]; len(vv) > 0 {
			fields = w.appendFields(fields, k, vv)
		}
	}
	return fields
}

// SetReadDeadline bounds the request body's reads.
func (w *responseWriter) SetReadDeadline(t time.Time) error {
	st := w.st
	st.c.mu.Lock()
	st.readDeadline = t
	st.c.mu.Unlock()
	signal(st.dataCh)
	return nil
}

// SetWriteDeadline bounds the waits for send window: a write still
// waiting at the deadline resets the stream (as x/net's timer does).
func (w *responseWriter) SetWriteDeadline(t time.Time) error {
	w.wdeadline = t
	return nil
}

// EnableFullDuplex is a no-op: HTTP/2 is always full duplex.
func (w *responseWriter) EnableFullDuplex() error { return nil }

// sentEnd records that the response ended (END_STREAM written, or the
// writes failed) and closes the stream when the request ended too, or
// resets it (NO_ERROR) when the client is still sending.
func (c *conn) sentEnd(st *stream) {
	c.mu.Lock()
	st.sentEnd = true
	open := !st.recvEnd && !st.removed
	if !open {
		c.closeStream(st)
	}
	c.mu.Unlock()
	if open {
		c.resetStream(st.id, 0, false)
	}
}

// bodyAllowed reports whether a status may have a body (RFC 9110).
func bodyAllowed(status int) bool {
	return !(status >= 100 && status <= 199 || status == 204 || status == 304)
}
