package waf

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// allSetNames lists every set name Google documents (stable only; the
// canaries are the same rules), json-sqli-canary included.
func allSetNames() []string {
	var out []string
	for _, v := range crsVersions {
		for _, c := range v.cats {
			out = append(out, c+v.infix+"-stable")
		}
	}
	return append(out, jsonSQLiSet)
}

// refsAt returns SetRefs for names, all at sensitivity s.
func refsAt(t testing.TB, s int, names ...string) []SetRef {
	t.Helper()
	refs := make([]SetRef, len(names))
	for i, n := range names {
		r, err := ParseWaf(n, map[string]any{"sensitivity": s})
		if err != nil {
			t.Fatal(err)
		}
		refs[i] = r
	}
	return refs
}

func compileT(t testing.TB, c *Compiler, refs []SetRef, opts Options) *Engine {
	t.Helper()
	e, err := c.Compile(refs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func newCompilerT(t testing.TB) *Compiler {
	t.Helper()
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// verdict is a Result as the loopback server reports it.
type verdict struct {
	Matched map[string][]string // "set@sensitivity" → signature IDs, matched sets only
	Head    bool
	Body    bool
	Args    bool
}

// of returns what the set named set reported (at whichever sensitivity
// it was compiled; use at for a set compiled at several).
func (v verdict) of(set string) []string {
	for k, ids := range v.Matched {
		if strings.HasPrefix(k, set+"@") {
			return ids
		}
	}
	return nil
}

// at returns what set reported at sensitivity s.
func (v verdict) at(set string, s int) []string {
	return v.Matched[fmt.Sprintf("%s@%d", set, s)]
}

// verdictHeader carries the loopback server's verdict.
const verdictHeader = "X-Waf-Verdict"

// serve runs e behind a net/http server on loopback: each request is
// evaluated with the first MaxBodyBytes+1 bytes of its body and answered
// with its verdict as JSON in a header.
func serve(t testing.TB, e *Engine) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prefix, err := io.ReadAll(io.LimitReader(r.Body, int64(e.Options().MaxBodyBytes)+1))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		res := e.Evaluate(r, prefix)
		v := verdict{Matched: map[string][]string{}, Head: res.HeadTruncated, Body: res.BodyTruncated, Args: res.ArgsTruncated}
		for i, s := range e.Sets() {
			if res.Sets[i].Matched {
				v.Matched[fmt.Sprintf("%s@%d", s.Set, s.Sensitivity)] = res.Sets[i].IDs
			}
		}
		b, _ := json.Marshal(v)
		w.Header().Set(verdictHeader, string(b)) // a header, so HEAD gets it too
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// do sends req to srv and decodes the verdict.
func do(t testing.TB, srv *httptest.Server, req *http.Request) verdict {
	t.Helper()
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return decodeVerdict(t, resp)
}

// doRaw writes raw, a whole HTTP/1.1 request, to srv over TCP and decodes
// the verdict; ok is false when the server refused the request itself
// (net/http's 400s), before the handler.
func doRaw(t testing.TB, srv *httptest.Server, raw []byte) (v verdict, ok bool) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", srv.Listener.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write(raw); err != nil {
		return verdict{}, false
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return verdict{}, false
	}
	defer resp.Body.Close()
	if resp.Header.Get(verdictHeader) == "" {
		return verdict{}, false
	}
	return decodeVerdict(t, resp), true
}

func decodeVerdict(t testing.TB, resp *http.Response) verdict {
	t.Helper()
	var v verdict
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if err := json.Unmarshal([]byte(resp.Header.Get(verdictHeader)), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// newReq builds a request to srv.
func newReq(t testing.TB, srv *httptest.Server, method, target, body string, headers ...string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+target, rd)
	if err != nil {
		t.Fatal(err)
	}
	if len(headers)%2 != 0 {
		panic(fmt.Sprintf("odd headers %q", headers))
	}
	for i := 0; i < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	return req
}
