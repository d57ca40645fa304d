package proxy

import (
	"bufio"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// wireRequest is a body-less HTTP/1.1 request as the fast transport writes
// it: no *http.Request and no url.URL are built.
type wireRequest struct {
	method   string // "" means GET
	addr     string // backend host:port, dialled; the Host when host is ""
	host     string // Host header
	path     string // decoded path
	rawPath  string // encoded path hint, as url.URL.RawPath
	rawQuery string
	// header is the complete outbound header. When it is nil, the
	// outbound header is the one handler.outHeader would build from src
	// and the forwarding fields below, and is written without building it.
	header http.Header

	src      http.Header // the client's request header
	clientIP string      // for X-Forwarded-For
	lbIP     string      // for X-Forwarded-For, "" when unknown
	proto    string      // X-Forwarded-Proto
	via      string      // this proxy's Via entry
}

// outHeader returns the outbound header as a map.
func (wr *wireRequest) outHeader() http.Header {
	if wr.header != nil {
		return wr.header
	}
	h := make(http.Header, len(wr.src)+4)
	copyHeaders(h, wr.src)
	delete(h, "Expect")
	if te := wr.src["Te"]; len(te) > 0 && listed(te, "trailers") {
		h["Te"] = []string{"trailers"}
	}
	h["X-Forwarded-For"] = []string{forwardedFor(wr.src["X-Forwarded-For"], wr.clientIP, wr.lbIP)}
	h["X-Forwarded-Proto"] = []string{wr.proto}
	h["Via"] = appendVia(wr.src["Via"], []string{wr.via})
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""}
	}
	return h
}

// Errors of writeRequestHead, as net/http's Transport words them.
var (
	errCTLInURI      = errors.New("net/http: can't write control character in Request.URL")
	errInvalidHeader = errors.New("net/http: invalid header field")
)

// reqWriteExclude are the headers http.Request.Write does not copy from
// Header: it writes Host, User-Agent and the framing itself.
func reqWriteExclude(k string) bool {
	switch k {
	case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
		return true
	}
	return false
}

// writeRequestHead writes the request line and header block of a
// body-less request, byte for byte what http.Request.Write writes except
// that header fields are not sorted by name (their order carries no
// meaning, RFC 9110 §5.3). Like net/http's Transport it refuses invalid
// header names and values (CR, LF and other control characters) and a
// URL with control characters. Hosts that need net/http's IDNA or zone
// handling are written by http.Request.Write itself.
func writeRequestHead(bw *bufio.Writer, wr *wireRequest) error {
	if !plainHost(wr.host) {
		return writeRequestSlow(bw, wr)
	}
	ua := "Go-http-client/1.1" // net/http's default when there is none
	if wr.header != nil {
		if err := checkHeader(wr.header); err != nil {
			return err
		}
		if vv, ok := wr.header["User-Agent"]; ok {
			ua = ""
			if len(vv) > 0 {
				ua = trimOWS(vv[0])
			}
		}
	} else {
		// outHeader keeps the client's User-Agent or sends none.
		ua = ""
		if vv := wr.src["User-Agent"]; len(vv) > 0 && !listed(wr.src["Connection"], "User-Agent") {
			if !validFieldValue(vv[0]) {
				return errInvalidHeader
			}
			ua = trimOWS(vv[0])
		}
	}
	u := url.URL{Path: wr.path, RawPath: wr.rawPath}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if hasCTL(path) || hasCTL(wr.rawQuery) {
		return errCTLInURI
	}
	method := wr.method
	if method == "" {
		method = http.MethodGet
	}
	bw.WriteString(method)
	bw.WriteByte(' ')
	bw.WriteString(path)
	if wr.rawQuery != "" {
		bw.WriteByte('?')
		bw.WriteString(wr.rawQuery)
	}
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(wr.host)
	bw.WriteString("\r\n")
	if ua != "" {
		bw.WriteString("User-Agent: ")
		bw.WriteString(ua)
		bw.WriteString("\r\n")
	}
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		// Many servers expect a Content-Length for these (net/http).
		bw.WriteString("Content-Length: 0\r\n")
	}
	if wr.header == nil {
		if err := writeForwarded(bw, wr); err != nil {
			return err
		}
	} else {
		for k, vv := range wr.header {
			if reqWriteExclude(k) {
				continue
			}
			for _, v := range vv {
				writeField(bw, k, trimOWS(v))
			}
		}
	}
	_, err := bw.WriteString("\r\n")
	return err
}

// writeField writes "k: v\r\n".
func writeField(bw *bufio.Writer, k, v string) {
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(v)
	bw.WriteString("\r\n")
}

// writeForwarded writes the header fields of wr.outHeader() without
// building it: the client's fields except hop-by-hop ones, Expect and
// those its Connection header lists, Te: trailers when asked for, then
// X-Forwarded-For, X-Forwarded-Proto and Via. A field that is not valid
// is refused before any of its bytes are written.
func writeForwarded(bw *bufio.Writer, wr *wireRequest) error {
	src := wr.src
	conn := src["Connection"]
	for k, vv := range src {
		switch k {
		case "X-Forwarded-For", "X-Forwarded-Proto", "Via":
			continue // written below
		case "Expect":
			continue // answered by the proxy (handler.outHeader)
		}
		if reqWriteExclude(k) || isHopHeader(k) || (len(conn) > 0 && listed(conn, k)) {
			continue
		}
		if !isToken(k) {
			return errInvalidHeader
		}
		for _, v := range vv {
			if !validFieldValue(v) {
				return errInvalidHeader
			}
			writeField(bw, k, trimOWS(v))
		}
	}
	if te := src["Te"]; len(te) > 0 && listed(te, "trailers") {
		bw.WriteString("Te: trailers\r\n")
	}
	// X-Forwarded-For: the prior values, the client, the LB, joined by
	// "," (forwardedFor), as one field.
	prior := src["X-Forwarded-For"]
	for _, p := range prior {
		if !validFieldValue(p) {
			return errInvalidHeader
		}
	}
	if !validFieldValue(wr.clientIP) || !validFieldValue(wr.lbIP) {
		return errInvalidHeader
	}
	bw.WriteString("X-Forwarded-For: ")
	for i, p := range prior {
		if i == 0 {
			p = trimLeftOWS(p)
		}
		bw.WriteString(p)
		bw.WriteByte(',')
	}
	bw.WriteString(wr.clientIP)
	if wr.lbIP != "" {
		bw.WriteByte(',')
		bw.WriteString(wr.lbIP)
	}
	bw.WriteString("\r\n")
	writeField(bw, "X-Forwarded-Proto", wr.proto)
	// Via: the prior fields, this proxy appended to the last (appendVia).
	via := src["Via"]
	for _, v := range via {
		if !validFieldValue(v) {
			return errInvalidHeader
		}
	}
	if len(via) == 0 {
		writeField(bw, "Via", wr.via)
		return nil
	}
	for i, v := range via {
		if i < len(via)-1 {
			writeField(bw, "Via", trimOWS(v))
			continue
		}
		bw.WriteString("Via: ")
		bw.WriteString(trimLeftOWS(v))
		bw.WriteString(", ")
		bw.WriteString(wr.via)
		bw.WriteString("\r\n")
	}
	return nil
}

// writeRequestSlow writes wr with http.Request.Write.
func writeRequestSlow(bw *bufio.Writer, wr *wireRequest) error {
	h := wr.outHeader()
	if err := checkHeader(h); err != nil {
		return err
	}
	req := &http.Request{
		Method:     wr.method,
		URL:        &url.URL{Scheme: "http", Host: wr.addr, Path: wr.path, RawPath: wr.rawPath, RawQuery: wr.rawQuery},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Host:       wr.host,
	}
	return req.Write(bw)
}

// checkHeader validates header names and values as net/http's Transport
// does before sending.
func checkHeader(h http.Header) error {
	for k, vv := range h {
		if !isToken(k) {
			return errInvalidHeader
		}
		for _, v := range vv {
			if !validFieldValue(v) {
				return errInvalidHeader
			}
		}
	}
	return nil
}

// plainHost reports a non-empty Host made only of letters, digits and
// ".-_:[]": one http.Request.Write would send unchanged.
func plainHost(h string) bool { return h != "" && alnumOr(h, ".-_:[]") }

// alnumOr reports whether every byte of s is an ASCII letter or digit or
// one of extra.
func alnumOr(s, extra string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte(extra, c) < 0:
			return false
		}
	}
	return true
}

// validFieldValue reports a field value without control characters other
// than horizontal tab (httpguts.ValidHeaderFieldValue).
func validFieldValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// hasCTL reports an ASCII control character.
func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c == 0x7f {
			return true
		}
	}
	return false
}

// trimLeftOWS trims leading spaces and tabs.
func trimLeftOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	return s
}

// trimOWS trims spaces and tabs at both ends (textproto.TrimString for
// values that contain no CR or LF).
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
