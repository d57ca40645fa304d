package soak

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Case is a hostile HTTP/2 request: a header list written unchecked,
// as a raw frame client writes it. Each is the client's mistake, so the
// answer must be a 400 or a stream or connection error, never a 5xx,
// and none may count against a backend (the steady load would see the
// ejection as 503s outside the convergence windows).
type h2Case struct {
	name   string
	fields []string // name, value pairs
}

func h2MalformedCases() []h2Case {
	req := func(method, authority, path string, extra ...string) []string {
		return append([]string{":method", method, ":scheme", "https", ":authority", authority, ":path", path}, extra...)
	}
	return []h2Case{
		{"h2 :method not a token", req("PO ST", "soak", "/soak/h2m")},
		{"h2 request line in :method", req("GET /admin HTTP/1.1", "soak", "/soak/h2m")},
		{"h2 space in :path", req("GET", "soak", "/soak/h2m?a b")},
		{"h2 :path not origin-form", req("GET", "soak", "soak/h2m")},
		{"h2 bad :authority", req("GET", `so"ak`, "/soak/h2m")},
		{"h2 Host differs from :authority", req("GET", "soak", "/soak/h2m", "host", "evil.example")},
		{"h2 CRLF in a value", req("GET", "soak", "/soak/h2m", "x-a", "1\r\nx-b: 2")},
		{"h2 connection field", req("GET", "soak", "/soak/h2m", "connection", "close")},
		{"h2 no :path", []string{":method", "GET", ":scheme", "https", ":authority", "soak"}},
	}
}

// dialH2 opens an HTTP/2 connection (ALPN h2 over TLS, or cleartext with
// prior knowledge) and writes the client preface and SETTINGS.
func (h *hostile) dialH2(tlsOn bool) (net.Conn, *http2.Framer, error) {
	c, err := h.dialALPN(tlsOn, 0, "h2")
	if err != nil {
		return nil, nil, err
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		h.close(c)
		return nil, nil, err
	}
	if err := fr.WriteSettings(); err != nil {
		h.close(c)
		return nil, nil, err
	}
	return c, fr, nil
}

// h2Block encodes a header list without checking it.
func h2Block(fields []string) []byte {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return b.Bytes()
}

// h2Malformed sends one hostile HTTP/2 request on its own connection and
// records the answer: the status, "RST_STREAM <code>", "GOAWAY <code>" or
// "closed".
func (h *hostile) h2Malformed(mc h2Case, tlsOn bool) {
	c, fr, err := h.dialH2(tlsOn)
	if err != nil {
		return
	}
	defer h.close(c)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	answer, body := "", ""
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h2Block(mc.fields), EndStream: true, EndHeaders: true}); err != nil {
		answer = "write failed (closed)"
	}
	for answer == "" {
		f, err := fr.ReadFrame()
		if err != nil {
			answer = "closed"
			if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
				answer = "no answer in 5s"
			}
			break
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame:
			answer = "RST_STREAM " + f.ErrCode.String()
		case *http2.GoAwayFrame:
			answer = "GOAWAY " + f.ErrCode.String()
		case *http2.MetaHeadersFrame:
			if st := f.PseudoValue("status"); st != "" && st[0] != '1' {
				answer = st
				for _, hf := range f.RegularFields() {
					if hf.Name == "x-spillway-status-details" {
						body = hf.Value
					}
				}
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st.Malformed++
	if h.st.MalformedAnswers == nil {
		h.st.MalformedAnswers = map[string]int{}
	}
	h.st.MalformedAnswers[mc.name+" → "+answer]++
	if len(answer) == 3 && answer[0] == '5' {
		h.note("malformed "+mc.name+" → "+answer, "details %q", body)
	}
}

// h2Slowloris holds an HTTP/2 connection without completing a request:
// after the preface only (even n), or with a header block that never
// ends, one CONTINUATION frame a second (odd n). The proxy must close it
// after its header timeout (30 s), as it closes an HTTP/1.1 slowloris.
func (h *hostile) h2Slowloris(ctx context.Context, tlsOn bool, n int, hold time.Duration) {
	c, fr, err := h.dialH2(tlsOn)
	if err != nil {
		sleepCtx(ctx, time.Second)
		return
	}
	defer h.close(c)
	h.mu.Lock()
	h.st.H2Slowloris++
	h.mu.Unlock()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = c.SetReadDeadline(time.Time{})
		for {
			if _, err := fr.ReadFrame(); err != nil {
				return
			}
		}
	}()
	trickle := n%2 == 1
	if trickle {
		blk := h2Block([]string{":method", "GET", ":scheme", "https", ":authority", "soak", ":path", "/soak/h2slow"})
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk, EndStream: true}); err != nil {
			return
		}
	}
	d := holdOpen(ctx, hold, closed, func(i int) error {
		if !trickle {
			return nil
		}
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		return fr.WriteContinuation(1, false, h2Block([]string{"x-slow-" + strconv.Itoa(i), "x"}))
	})
	h.mu.Lock()
	h.st.H2SlowlorisServerClosed, h.st.H2SlowlorisMinClose, h.st.H2SlowlorisMaxClose = countClose(d, h.st.H2SlowlorisServerClosed, h.st.H2SlowlorisMinClose, h.st.H2SlowlorisMaxClose)
	h.mu.Unlock()
}
