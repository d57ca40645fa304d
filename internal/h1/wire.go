package h1

import (
	"bufio"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// Request is a body-less HTTP/1.1 request as Transport.Do writes it: no
// *http.Request and no url.URL are built.
type Request struct {
	Method   string // "" means GET
	Addr     string // backend host:port, dialled; the Host when Host is ""
	Host     string // Host header
	Path     string // decoded path
	RawPath  string // encoded path hint, as url.URL.RawPath
	RawQuery string
	// Header is the complete outbound header. When it is nil, the
	// outbound header is the one OutHeader builds from Forward, and it is
	// written without building it.
	Header http.Header
	// Forward is used when Header is nil.
	Forward Forward
}

// Forward describes the outbound header of a proxied request: the
// client's fields except hop-by-hop ones (IsHopHeader), Expect and those
// its Connection header lists; "Te: trailers" when the client's Te lists
// trailers; X-Forwarded-For extended with the client and load balancer
// addresses (ForwardedFor); X-Forwarded-Proto; Via extended with this
// proxy's entry (AppendVia); and an empty User-Agent when the client sent
// none (so that none is sent).
type Forward struct {
	Header   http.Header // the client's request header
	ClientIP string      // for X-Forwarded-For
	LBIP     string      // for X-Forwarded-For, "" when unknown
	Proto    string      // X-Forwarded-Proto
	Via      string      // this proxy's Via entry
	// Add are fields added to the outbound header (a zero Name is
	// skipped): the trace context headers the proxy adds when the client
	// sent none. They must not name a field the client sent.
	Add [2]Field
}

// Field is one header field.
type Field struct{ Name, Value string }

// OutHeader returns the outbound header as a map: Header, or the one
// Forward describes.
func (wr *Request) OutHeader() http.Header {
	if wr.Header != nil {
		return wr.Header
	}
	h := make(http.Header, len(wr.Forward.Header)+4)
	CopyHeaders(h, wr.Forward.Header)
	delete(h, "Expect")
	if te := wr.Forward.Header["Te"]; len(te) > 0 && Listed(te, "trailers") {
		h["Te"] = []string{"trailers"}
	}
	h["X-Forwarded-For"] = []string{ForwardedFor(wr.Forward.Header["X-Forwarded-For"], wr.Forward.ClientIP, wr.Forward.LBIP)}
	h["X-Forwarded-Proto"] = []string{wr.Forward.Proto}
	h["Via"] = AppendVia(wr.Forward.Header["Via"], []string{wr.Forward.Via})
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""}
	}
	for _, f := range wr.Forward.Add {
		if f.Name != "" {
			h[f.Name] = []string{f.Value}
		}
	}
	return h
}

// ErrInvalidRequest is wrapped by the error of a request that
// Request.Write, CheckRequest and Transport refuse because of what the
// request itself holds: a method that is not a token, a target with
// whitespace or control bytes, a Host that is not valid, or a header
// field with an invalid name or value. Nothing was sent, and the backend
// is not to blame: a proxy counts such a failure against the request.
var ErrInvalidRequest = errors.New("invalid request")

// requestError is an error of ErrInvalidRequest's kind.
type requestError string

func (e requestError) Error() string { return string(e) }

// Is makes errors.Is(err, ErrInvalidRequest) true.
func (e requestError) Is(target error) bool { return target == ErrInvalidRequest }

// Errors of Request.Write and CheckRequest, worded as net/http's
// Transport words them where it has them.
var (
	errCTLInURI      error = requestError("net/http: can't write control character in Request.URL")
	errSpaceInURI    error = requestError("h1: can't write whitespace in the request target")
	errNotOrigin     error = requestError("h1: request path is neither origin-form nor \"*\"")
	errInvalidHeader error = requestError("net/http: invalid header field")
	errInvalidMethod error = requestError("net/http: invalid method")
	errInvalidHost   error = requestError("http: invalid Host header")
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

// Write writes the request line and header block of wr, a body-less
// request, to bw (without flushing): byte for byte what http.Request.Write writes except
// that header fields are not sorted by name (their order carries no
// meaning, RFC 9110 §5.3). Like net/http's Transport it refuses invalid
// header names and values (CR, LF and other control characters) and a
// URL with control characters. Unlike net/http, it also refuses what
// would not parse back as written (see "Differences" in the package
// documentation): a method that is not a token, whitespace in the
// target (a query is written as it is, so "a b" would split the request
// line), and an ASCII Host that is not valid (net/http sends an empty
// Host instead). Hosts that need net/http's IDNA or zone handling are
// written by http.Request.Write itself. Every refusal wraps
// ErrInvalidRequest.
func (wr *Request) Write(bw *bufio.Writer) error {
	if wr.Method != "" && !isToken(wr.Method) {
		return errInvalidMethod
	}
	u := url.URL{Path: wr.Path, RawPath: wr.RawPath}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if err := checkTarget(path, wr.RawQuery); err != nil {
		return err
	}
	if !plainHost(wr.Host) {
		if isASCII(wr.Host) && !validHost(wr.Host) {
			return errInvalidHost
		}
		return writeRequestSlow(bw, wr)
	}
	ua := "Go-http-client/1.1" // net/http's default when there is none
	if wr.Header != nil {
		if err := checkHeader(wr.Header); err != nil {
			return err
		}
		if vv, ok := wr.Header["User-Agent"]; ok {
			ua = ""
			if len(vv) > 0 {
				ua = trimOWS(vv[0])
			}
		}
	} else {
		// outHeader keeps the client's User-Agent or sends none.
		ua = ""
		if vv := wr.Forward.Header["User-Agent"]; len(vv) > 0 && !Listed(wr.Forward.Header["Connection"], "User-Agent") {
			if !validFieldValue(vv[0]) {
				return errInvalidHeader
			}
			ua = trimOWS(vv[0])
		}
	}
	method := wr.Method
	if method == "" {
		method = http.MethodGet
	}
	bw.WriteString(method)
	bw.WriteByte(' ')
	bw.WriteString(path)
	if wr.RawQuery != "" {
		bw.WriteByte('?')
		bw.WriteString(wr.RawQuery)
	}
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(wr.Host)
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
	if wr.Header == nil {
		if err := writeForwarded(bw, wr); err != nil {
			return err
		}
	} else {
		for k, vv := range wr.Header {
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

// writeForwarded writes the header fields of wr.OutHeader() without
// building it: the client's fields except hop-by-hop ones, Expect and
// those its Connection header lists, Te: trailers when asked for, then
// X-Forwarded-For, X-Forwarded-Proto and Via. A field that is not valid
// is refused before any of its bytes are written.
func writeForwarded(bw *bufio.Writer, wr *Request) error {
	src := wr.Forward.Header
	conn := src["Connection"]
	for k, vv := range src {
		switch k {
		case "X-Forwarded-For", "X-Forwarded-Proto", "Via":
			continue // written below
		case "Expect":
			continue // answered by the proxy (see Forward)
		}
		if reqWriteExclude(k) || IsHopHeader(k) || (len(conn) > 0 && Listed(conn, k)) {
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
	if te := src["Te"]; len(te) > 0 && Listed(te, "trailers") {
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
	if !validFieldValue(wr.Forward.ClientIP) || !validFieldValue(wr.Forward.LBIP) {
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
	bw.WriteString(wr.Forward.ClientIP)
	if wr.Forward.LBIP != "" {
		bw.WriteByte(',')
		bw.WriteString(wr.Forward.LBIP)
	}
	bw.WriteString("\r\n")
	writeField(bw, "X-Forwarded-Proto", wr.Forward.Proto)
	for _, f := range wr.Forward.Add {
		if f.Name == "" {
			continue
		}
		if !isToken(f.Name) || !validFieldValue(f.Value) {
			return errInvalidHeader
		}
		writeField(bw, f.Name, f.Value)
	}
	// Via: the prior fields, this proxy appended to the last (appendVia).
	via := src["Via"]
	for _, v := range via {
		if !validFieldValue(v) {
			return errInvalidHeader
		}
	}
	if len(via) == 0 {
		writeField(bw, "Via", wr.Forward.Via)
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
		bw.WriteString(wr.Forward.Via)
		bw.WriteString("\r\n")
	}
	return nil
}

// writeRequestSlow writes wr with http.Request.Write.
func writeRequestSlow(bw *bufio.Writer, wr *Request) error {
	h := wr.OutHeader()
	if err := checkHeader(h); err != nil {
		return err
	}
	req := &http.Request{
		Method:     wr.Method,
		URL:        &url.URL{Scheme: "http", Host: wr.Addr, Path: wr.Path, RawPath: wr.RawPath, RawQuery: wr.RawQuery},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Host:       wr.Host,
	}
	return req.Write(bw)
}

// checkTarget refuses a request target (path and query as written) with
// control bytes (as net/http does) or whitespace, which would end the
// target early on the wire: "GET /x?a b HTTP/1.1" is a request for /x?a
// with a version of "b HTTP/1.1" to a lenient parser. A path that is not
// "" (sent as "/"), "*" without a query or absolute ("/…") is refused
// too: no parser reads "GET x HTTP/1.1" as a path (RFC 9112 §3.2).
func checkTarget(path, query string) error {
	if path != "" && path[0] != '/' && (path != "*" || query != "") {
		return errNotOrigin
	}
	if hasCTL(path) || hasCTL(query) {
		return errCTLInURI
	}
	if strings.IndexByte(path, ' ') >= 0 || strings.IndexByte(query, ' ') >= 0 {
		return errSpaceInURI
	}
	return nil
}

// CheckRequest reports, with an error wrapping ErrInvalidRequest, a
// request that Request.Write would refuse: a method that is not a token,
// control bytes or whitespace in the query (the path is escaped when
// written), an ASCII Host that is not valid, or a header field whose name
// is not a token or whose value has control bytes. A proxy calls it
// before handing a request to a transport that would refuse it with
// errors of its own (net/http's), so that the refusal is known to be the
// request's.
func CheckRequest(r *http.Request) error {
	if r.Method != "" && !isToken(r.Method) {
		return errInvalidMethod
	}
	if r.URL != nil {
		if err := checkTarget(r.URL.Path, r.URL.RawQuery); err != nil {
			return err
		}
	}
	if h := r.Host; h != "" && isASCII(h) && !validHost(h) {
		return errInvalidHost
	}
	return checkHeader(r.Header)
}

// ValidMethod reports whether m is an RFC 9110 §9.1 method: a token.
func ValidMethod(m string) bool { return isToken(m) }

// ValidHost reports whether h is a Host (or HTTP/2 :authority) value
// Server accepts: the bytes of httpguts.ValidHostHeader, no '@'.
func ValidHost(h string) bool { return validHost(h) }

// ValidTarget reports whether a request target has neither whitespace
// nor control bytes, which no request line can carry (RFC 9112 §3).
func ValidTarget(t string) bool { return checkTarget(t, "") == nil }

// isASCII reports whether s has only 7-bit bytes.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
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
