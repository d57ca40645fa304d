package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
)

// Fast message-head parsing for the HTTP/1.1 hot path.
//
// http.ReadRequest and http.ReadResponse allocate a dozen objects per
// message (a string per header value, textproto's line buffers, the
// transfer-encoding state). The parsers here take the common shape of a
// message (the whole head already buffered, CRLF line ends, no body
// framing beyond Content-Length) and build the same *http.Request or
// *http.Response from one string holding the head: names and values are
// substrings of it. Anything outside that shape (obsolete line folding,
// bare LF, Transfer-Encoding, a request body, HTTP/1.0, absolute-form
// targets, odd bytes, …) makes them decline without consuming a byte,
// and the caller falls back to the standard library, which then also
// produces its usual errors. FuzzRequestHead and FuzzResponseHead check
// that whatever they accept, they parse exactly as net/http does.

// crlf2 ends a message head.
const crlf2 = "\r\n\r\n"

// maxFastFields bounds the header lines the fast parsers take; more go
// to net/http.
const maxFastFields = 64

// bufferedHead returns the complete message head at the start of br's
// buffer (through the empty line), or false when it is not all there.
func bufferedHead(br *bufio.Reader) ([]byte, bool) {
	b, _ := br.Peek(br.Buffered())
	i := bytes.Index(b, []byte(crlf2))
	if i < 0 {
		return nil, false
	}
	return b[:i+4], true
}

// readRequestFast parses the request whose whole head b (from
// bufferedHead) starts br's buffer, when it is in the common shape; it
// consumes the head only when it returns a request, which carries ctx.
func readRequestFast(ctx context.Context, br *bufio.Reader, b []byte) *http.Request {
	head := string(b)
	line, rest, _ := strings.Cut(head, "\r\n")
	method, target, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(target, " ")
	if !ok1 || !ok2 || proto != "HTTP/1.1" || !isToken(method) || method == http.MethodConnect {
		return nil
	}
	parts := new(requestParts)
	u := requestURL(target, &parts.url)
	if u == nil {
		return nil
	}
	hdr, sum, ok := parseFields(rest, true, parts.vals[:])
	// Body framing, Pragma's Cache-Control rewrite and several Host
	// headers (an error) are net/http's business.
	if !ok || sum.special || sum.lengths > 0 || sum.hosts > 1 {
		return nil
	}
	r := http.Request{
		Method:     method,
		URL:        u,
		Proto:      proto,
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     hdr,
		Body:       http.NoBody,
		Host:       sum.host, // not in hdr, as with http.ReadRequest
		Close:      sum.close,
		RequestURI: target,
	}
	br.Discard(len(b))
	return r.WithContext(ctx) // r itself stays on the stack
}

// requestParts holds a fast-parsed request's URL and header values, to
// allocate them together.
type requestParts struct {
	url  url.URL
	vals [fastValues]string
}

// fastValues is how many header values fit in the fast parsers'
// per-message arrays; more take one more allocation.
const fastValues = 12

// requestURL parses an origin-form request target as url.ParseRequestURI
// does, without calling it for plain paths (those are parsed into u); nil
// declines.
func requestURL(target string, u *url.URL) *url.URL {
	if len(target) == 0 || target[0] != '/' {
		return nil
	}
	for i := 0; i < len(target); i++ {
		if c := target[i]; c <= ' ' || c >= 0x7f {
			return nil
		}
	}
	path, query, _ := strings.Cut(target, "?")
	if !plainPath(path) || strings.HasSuffix(target, "?") {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return nil
		}
		return u
	}
	*u = url.URL{Path: path, RawQuery: query}
	return u
}

// plainPath reports whether p is its own escaped form: made only of the
// bytes url.URL.EscapedPath leaves alone, so Path = p and RawPath = "".
func plainPath(p string) bool { return alnumOr(p, "-_.~$&+,/:;=@") }

// readResponseFast parses the response whose whole head b (from
// bufferedHead) starts br's buffer, when it is in the common shape:
// HTTP/1.1, a final status other than 204 and 304, one Content-Length, no
// Transfer-Encoding, not to a HEAD request, not closing the connection.
// It consumes the head only when it returns a response; the body reads
// the next ContentLength bytes of br.
func readResponseFast(br *bufio.Reader, b []byte, method string) *fastResponse {
	if method == http.MethodHead || len(b) < len("HTTP/1.1 200\r\n\r\n") || string(b[:9]) != "HTTP/1.1 " {
		return nil
	}
	head := string(b)
	line, rest, _ := strings.Cut(head, "\r\n")
	status := line[9:]
	if !validFieldValue(status) {
		return nil
	}
	code := statusCode(status)
	if code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return nil
	}
	fr := new(fastResponse)
	hdr, sum, ok := parseFields(rest, false, fr.vals[:])
	if !ok || sum.special || sum.lengths != 1 || sum.close {
		return nil
	}
	n := parseLength(sum.length)
	if n < 0 {
		return nil
	}
	fr.resp = http.Response{
		Status:        status,
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        hdr,
		ContentLength: n,
		Body:          http.NoBody,
	}
	if n > 0 {
		fr.body = lengthBody{br: br, n: n}
		fr.resp.Body = &fr.body
	}
	br.Discard(len(b))
	return fr
}

// fastResponse is a response from readResponseFast, allocated together
// with its body readers and header values.
type fastResponse struct {
	resp   http.Response
	body   lengthBody
	pooled pooledBody // for the caller (see Transport.exchange)
	vals   [fastValues]string
}

// statusCode returns the status code of a status line's "200 OK" part
// (three digits, then a space or nothing), or -1.
func statusCode(s string) int {
	if len(s) < 3 || (len(s) > 3 && s[3] != ' ') {
		return -1
	}
	code := 0
	for i := 0; i < 3; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return -1
		}
		code = code*10 + int(c-'0')
	}
	return code
}

// parseLength parses a Content-Length value of at most 18 digits, or -1.
func parseLength(s string) int64 {
	if len(s) == 0 || len(s) > 18 {
		return -1
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// lengthBody is a response body of a known length read from the
// connection's buffered reader.
type lengthBody struct {
	br *bufio.Reader
	n  int64 // bytes left
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.br.Read(p)
	b.n -= int64(n)
	if b.n > 0 && err == io.EOF {
		err = io.ErrUnexpectedEOF
	} else if b.n == 0 && err == nil {
		err = io.EOF
	}
	return n, err
}

func (b *lengthBody) Close() error { return nil }

// fieldSummary is what the fast parsers need to know of a header block.
type fieldSummary struct {
	special bool   // Transfer-Encoding, Pragma or Trailer: net/http's business
	close   bool   // Connection lists "close"
	hosts   int    // Host fields
	host    string // the first Host value
	lengths int    // Content-Length fields
	length  string // the first Content-Length value
}

// parseFields parses header lines ("Name: value\r\n" … "\r\n") as
// textproto.Reader.ReadMIMEHeader does, declining what it would treat
// specially or reject. With skipHost, Host fields are left out of the
// map (and only summarised). Values are kept in strs when it has room.
func parseFields(s string, skipHost bool, strs []string) (http.Header, fieldSummary, bool) {
	var sum fieldSummary
	n := strings.Count(s, "\n") - 1 // lines end in CRLF; a stray LF is refused below
	if n < 0 || n > maxFastFields {
		return nil, sum, false
	}
	h := make(http.Header, n)
	if n > len(strs) {
		strs = make([]string, n)
	}
	for {
		line, rest, _ := strings.Cut(s, "\r\n")
		s = rest
		if line == "" {
			return h, sum, true
		}
		colon := strings.IndexByte(line, ':')
		if colon <= 0 {
			return nil, sum, false
		}
		key, canonical := fieldName(line[:colon])
		if key == "" {
			return nil, sum, false
		}
		if !canonical {
			key = textproto.CanonicalMIMEHeaderKey(key)
		}
		v := line[colon+1:]
		if !validFieldValue(v) {
			return nil, sum, false
		}
		v = trimOWS(v)
		switch key {
		case "Host":
			if sum.hosts++; sum.hosts == 1 {
				sum.host = v
			}
			if skipHost {
				continue
			}
		case "Content-Length":
			if sum.lengths++; sum.lengths == 1 {
				sum.length = v
			}
		case "Connection":
			sum.close = sum.close || Listed([]string{v}, "close")
		case "Transfer-Encoding", "Pragma", "Trailer":
			sum.special = true
		}
		if vv := h[key]; vv == nil {
			vv, strs = strs[:1:1], strs[1:]
			vv[0] = v
			h[key] = vv
		} else {
			h[key] = append(vv, v)
		}
	}
}

// fieldName checks that k is a token and reports whether it is in
// canonical form; it returns "" for an invalid name.
func fieldName(k string) (string, bool) {
	canonical, upper := true, true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !isTokenByte(c) {
			return "", false
		}
		switch {
		case upper && 'a' <= c && c <= 'z', !upper && 'A' <= c && c <= 'Z':
			canonical = false
		}
		upper = c == '-'
	}
	return k, canonical
}

// isToken reports whether s is a non-empty RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTokenByte(s[i]) {
			return false
		}
	}
	return true
}

// tokenLo and tokenHi have a bit set for each RFC 9110 tchar in 0–63 and
// 64–127: "!#$%&'*+-.^_`|~", digits and letters.
const (
	tokenLo uint64 = 1<<'!' | 1<<'#' | 1<<'$' | 1<<'%' | 1<<'&' | 1<<'\'' | 1<<'*' | 1<<'+' |
		1<<'-' | 1<<'.' | (1<<10-1)<<'0'
	tokenHi uint64 = (1<<26-1)<<('A'-64) | 1<<('^'-64) | 1<<('_'-64) | 1<<('`'-64) |
		(1<<26-1)<<('a'-64) | 1<<('|'-64) | 1<<('~'-64)
)

func isTokenByte(c byte) bool {
	switch {
	case c < 64:
		return tokenLo&(1<<c) != 0
	case c < 128:
		return tokenHi&(1<<(c-64)) != 0
	}
	return false
}

// framingScan notes, as a request head streams past, whether it has
// Content-Length and Transfer-Encoding fields. http.ReadRequest removes
// Content-Length from a chunked request and Transfer-Encoding from an
// HTTP/1.0 one, so the raw head is the only place to see that a request
// had both (ambiguous framing, RFC 9112 §6.1 and §6.3). Lines end in LF
// with an optional CR before it, as textproto reads them; lines that
// start with a space or tab continue the previous field; the scan stops
// at the first empty line after the request line.
type framingScan struct {
	line    int                            // lines ended so far (0: in the request line)
	n       int                            // bytes of the current line
	cr      bool                           // the current line's last byte is CR
	inName  bool                           // still in the current field's name
	name    [len("transfer-encoding")]byte // its first bytes, lower-cased
	done    bool                           // the head has ended
	cl, te  bool                           // the fields seen
	ignored bool                           // the name outgrew the array
	// Host fields, which http.ReadRequest takes out of the header map
	// (net/http's server checks them before that): whether one was
	// seen, and whether a value had a byte validHost refuses or
	// whitespace inside it.
	host, hostBad bool
	inHost        bool // in a Host field's value (or its continuation)
	hostByte      bool // the value has had a non-whitespace byte
	hostSpace     bool // whitespace after it
}

// reset starts a new head.
func (s *framingScan) reset() { *s = framingScan{} }

// feed scans the next bytes of the stream.
func (s *framingScan) feed(p []byte) {
	for _, b := range p {
		if s.done {
			return
		}
		if b == '\n' {
			if s.line > 0 && (s.n == 0 || s.n == 1 && s.cr) {
				s.done = true
				return
			}
			s.line++
			s.n, s.cr, s.inName, s.ignored = 0, false, false, false
			// A continuation line joins the value with a space.
			s.hostSpace = s.hostByte
			continue
		}
		if s.n == 0 && s.line > 0 && b != ' ' && b != '\t' {
			s.inName, s.inHost = true, false
		}
		if s.inHost {
			switch {
			case b == ' ' || b == '\t':
				s.hostSpace = s.hostSpace || s.hostByte
			case b == '\r':
			default:
				s.hostBad = s.hostBad || s.hostSpace || !validHost(string(b))
				s.hostByte = true
			}
		}
		if s.inName {
			switch {
			case b == ':':
				s.inName = false
				name := string(s.name[:min(s.n, len(s.name))])
				if !s.ignored {
					s.cl = s.cl || name == "content-length"
					s.te = s.te || name == "transfer-encoding"
					if name == "host" && s.n == len("host") {
						s.host, s.inHost = true, true
						s.hostByte, s.hostSpace = false, false
					}
				}
			case s.n < len(s.name):
				if 'A' <= b && b <= 'Z' {
					b += 'a' - 'A'
				}
				s.name[s.n] = b
			default:
				s.ignored = true
			}
		}
		s.n++
		s.cr = b == '\r'
	}
}

// errInvalidFieldName is the error of a message head (a request's, or a
// backend response's) with a field name that is not a token.
var errInvalidFieldName = errors.New("invalid header name")

// ErrAmbiguousFraming is wrapped by the error of a request head whose
// body framing is ambiguous (Server's, and CheckGuard's).
var ErrAmbiguousFraming = errors.New("ambiguous message framing")

// check returns an error wrapping ErrAmbiguousFraming when the scanned
// head of r had both Transfer-Encoding and Content-Length, or had
// Transfer-Encoding in an HTTP/1.0 request (which http.ReadRequest
// ignores, reading the body by Content-Length, or as empty).
func (s *framingScan) check(r *http.Request) error {
	return headFraming{cl: s.cl, te: s.te}.check(r)
}

// check refuses the framing of r's head (RFC 9112 §6.1, §6.3):
// Transfer-Encoding in HTTP/1.0, or with Content-Length.
func (f headFraming) check(r *http.Request) error {
	switch {
	case f.te && !r.ProtoAtLeast(1, 1):
		return fmt.Errorf("%w: Transfer-Encoding in an HTTP/1.0 request", ErrAmbiguousFraming)
	case f.te && f.cl:
		return fmt.Errorf("%w: both Transfer-Encoding and Content-Length", ErrAmbiguousFraming)
	}
	return nil
}
