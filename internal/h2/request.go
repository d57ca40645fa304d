package h2

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
)

// processHeaders opens a stream for a request's HEADERS, or takes a
// stream's trailers (RFC 9113 §8.1), as x/net's server does.
func (c *conn) processHeaders(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if id%2 != 1 {
		return connError(http2.ErrCodeProtocol)
	}
	if st, _ := c.state(id); st != nil {
		return c.processTrailers(st, f)
	}
	if id <= c.maxStreamID {
		if c.recentlyReset(id) {
			return nil
		}
		return connError(http2.ErrCodeProtocol) // a closed stream
	}
	c.setMaxStreamID(id)
	c.mu.Lock()
	n := len(c.streams)
	c.mu.Unlock()
	if n+1 > int(c.maxStreams) {
		if c.unackedSettings == 0 {
			return streamError(id, http2.ErrCodeProtocol)
		}
		return streamError(id, http2.ErrCodeRefusedStream)
	}
	if f.HasPriority() && f.Priority.StreamDep == id {
		return streamError(id, http2.ErrCodeProtocol)
	}
	st, err := c.newStream(f)
	if err != nil {
		return err
	}
	return c.start(st)
}

// processTrailers takes a HEADERS frame on an open stream: trailers.
func (c *conn) processTrailers(st *stream, f *http2.MetaHeadersFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.recvEnd {
		return streamError(st.id, http2.ErrCodeStreamClosed)
	}
	if st.gotTrailer {
		return connError(http2.ErrCodeProtocol)
	}
	st.gotTrailer = true
	if !f.StreamEnded() || len(f.PseudoFields()) > 0 {
		return streamError(st.id, http2.ErrCodeProtocol)
	}
	if st.trailer != nil {
		for _, hf := range f.RegularFields() {
			k := c.fields.canonicalKey(hf.Name)
			if !httpguts.ValidTrailerHeader(k) {
				return streamError(st.id, http2.ErrCodeProtocol)
			}
			st.trailer[k] = append(st.trailer[k], hf.Value)
		}
	}
	st.endStream()
	return nil
}

// newStream builds a stream and its request from a request's HEADERS.
func (c *conn) newStream(f *http2.MetaHeadersFrame) (*stream, error) {
	id := f.StreamID
	rp, err := c.requestParams(f)
	if err != nil {
		return nil, err
	}
	st := &stream{c: c, id: id, declLen: -1}
	req, needsContinue, err := c.newRequest(st, rp, !f.StreamEnded())
	if err != nil {
		return nil, err
	}
	st.req = req
	st.body = requestBody{st: st, needsContinue: needsContinue}
	if f.StreamEnded() {
		st.recvEnd = true
		st.bodyErr = errClosedBody
		req.Body = http.NoBody
	} else {
		req.Body = &st.body
		st.declLen = req.ContentLength
		st.dataCh = make(chan struct{}, 1)
	}
	if req.Trailer != nil {
		st.trailer = make(http.Header)
	}
	st.rw.init(st, rp.truncated)
	return st, nil
}

// reqParams are a request's pseudo-header fields and header.
type reqParams struct {
	method, scheme, authority, path, protocol string
	header                                    http.Header
	truncated                                 bool // the header list was over the limit
}

// requestParams checks a request's pseudo-header fields (RFC 9113
// §8.3.1, x/net's rules; the Framer checked names, values and order).
func (c *conn) requestParams(f *http2.MetaHeadersFrame) (reqParams, error) {
	rp := reqParams{
		method: f.PseudoValue("method"), scheme: f.PseudoValue("scheme"),
		authority: f.PseudoValue("authority"), path: f.PseudoValue("path"),
		protocol: f.PseudoValue("protocol"), truncated: f.Truncated,
	}
	if !validPseudo(&rp) {
		return rp, streamError(f.StreamID, http2.ErrCodeProtocol)
	}
	fields := f.RegularFields()
	rp.header = make(http.Header, len(fields))
	// One backing array for the values, as net/textproto does: a
	// name's first value is a capacity-1 slice of it, so that a
	// repeated name's append copies rather than overwrites.
	vals := make([]string, len(fields))
	for i, hf := range fields {
		k := c.fields.canonicalKey(hf.Name)
		if vv, ok := rp.header[k]; ok {
			rp.header[k] = append(vv, hf.Value)
			continue
		}
		vals[i] = hf.Value
		rp.header[k] = vals[i : i+1 : i+1]
	}
	if rp.authority == "" {
		rp.authority = rp.header.Get("Host")
	}
	return rp, nil
}

// validPseudo reports whether a request's pseudo-header fields are
// usable: no extended CONNECT (off, as in x/net by default), a CONNECT
// with :authority only, any other method with :path and an http or
// https :scheme.
func validPseudo(rp *reqParams) bool {
	switch {
	case rp.protocol != "":
		return false
	case rp.method == "CONNECT":
		return rp.path == "" && rp.scheme == "" && rp.authority != ""
	}
	return rp.method != "" && rp.path != "" && (rp.scheme == "https" || rp.scheme == "http")
}

// newRequest builds the http.Request as x/net's server does.
func (c *conn) newRequest(st *stream, rp reqParams, bodyOpen bool) (*http.Request, bool, error) {
	h := rp.header
	needsContinue := httpguts.HeaderValuesContainsToken(h["Expect"], "100-continue")
	if needsContinue {
		delete(h, "Expect")
	}
	if cookies := h["Cookie"]; len(cookies) > 1 {
		h["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	trailer := declaredTrailers(h)
	u, requestURI, err := requestTarget(rp)
	if err != nil {
		return nil, false, streamError(st.id, http2.ErrCodeProtocol)
	}
	var tlsState = c.tls
	if rp.scheme != "https" {
		tlsState = nil
	}
	st.ctx, st.cancel = context.WithCancel(c.ctx)
	req := &http.Request{
		Method: rp.method, URL: u, RemoteAddr: c.remote, Header: h, RequestURI: requestURI,
		Proto: "HTTP/2.0", ProtoMajor: 2, TLS: tlsState, Host: rp.authority, Trailer: trailer,
	}
	req = req.WithContext(st.ctx)
	if bodyOpen {
		req.ContentLength = -1
		if vv, ok := h["Content-Length"]; ok {
			req.ContentLength = 0
			if cl, err := strconv.ParseUint(vv[0], 10, 63); err == nil {
				req.ContentLength = int64(cl)
			}
		}
	}
	return req, needsContinue, nil
}

// declaredTrailers takes the Trailer field out of h and returns the
// trailers it declares.
func declaredTrailers(h http.Header) http.Header {
	var trailer http.Header
	for _, v := range h["Trailer"] {
		for key := range strings.SplitSeq(v, ",") {
			key = textproto.CanonicalMIMEHeaderKey(textproto.TrimString(key))
			switch key {
			case "Transfer-Encoding", "Trailer", "Content-Length":
			default:
				if trailer == nil {
					trailer = make(http.Header)
				}
				trailer[key] = nil
			}
		}
	}
	delete(h, "Trailer")
	return trailer
}

var errBadTarget = errors.New("bad request target")

// requestTarget checks :authority against Host and parses :path
// (x/net's httpcommon.NewServerRequest); it may update rp.authority
// through the header.
func requestTarget(rp reqParams) (*url.URL, string, error) {
	h := rp.header
	authority := rp.authority
	if host := h["Host"]; len(host) == 1 {
		if rp.authority != host[0] {
			return nil, "", errBadTarget
		}
		delete(h, "Host")
	} else if len(host) > 1 {
		return nil, "", errBadTarget
	}
	if strings.IndexByte(authority, '@') != -1 && (rp.scheme == "http" || rp.scheme == "https") {
		return nil, "", errBadTarget
	}
	if authority != "" && !httpguts.ValidHostHeader(authority) {
		return nil, "", errBadTarget
	}
	if rp.method == "CONNECT" {
		return &url.URL{Host: authority}, authority, nil
	}
	if rp.path == "" || (rp.path[0] != '/' && rp.path != "*") {
		return nil, "", errBadTarget
	}
	u, err := url.ParseRequestURI(rp.path)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", errBadTarget, err)
	}
	return u, rp.path, nil
}

// connHeaders are the connection-specific fields a request must not
// carry (RFC 9113 §8.2.2).
var connHeaders = [...]string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade"}

// checkRequestHeaders is x/net's checkValidHTTP2RequestHeaders: such a
// request is answered 400.
func checkRequestHeaders(h http.Header) error {
	for _, k := range connHeaders {
		if _, ok := h[k]; ok {
			return fmt.Errorf("request header %q is not valid in HTTP/2", k)
		}
	}
	te := h["Te"]
	if len(te) > 0 && (len(te) > 1 || (te[0] != "trailers" && te[0] != "")) {
		return errors.New(`request header "TE" may only be "trailers" in HTTP/2`)
	}
	return nil
}
