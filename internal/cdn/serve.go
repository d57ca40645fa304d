package cdn

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/internal/cdnpolicy"
)

// maxRanges is the most ranges a request may ask of a cached object;
// a Range with more is ignored (the whole object is sent, as RFC 9110
// §14.2 allows), so that many small or overlapping ranges cannot make a
// response larger than the object.
const maxRanges = 16

// serve writes obj to w as the answer to r, with Age and Cache-Status:
// ranges and conditional requests are answered from it
// (http.ServeContent), HEAD without a body. k are the counters of obj's
// backend.
func (c *Cache) serve(w http.ResponseWriter, r *http.Request, obj *Object, k *Counters, now time.Time, status string, res *Result) {
	h := w.Header()
	for name, v := range obj.Header {
		h[name] = v
	}
	clen := obj.clen
	if clen == nil { // not prepared: a test's object
		clen = []string{strconv.Itoa(len(obj.Body))}
	}
	if obj.ClientCC != "" {
		h["Cache-Control"] = obj.cc
		if obj.cc == nil {
			h["Cache-Control"] = []string{obj.ClientCC}
		}
	}
	// Age and Cache-Status share one allocation.
	vals := []string{strconv.FormatInt(int64(obj.age(now)/time.Second), 10), status}
	h["Age"], h["Cache-Status"] = vals[0:1:1], vals[1:2:2]
	res.Hit = true
	k.Hits.Add(1)
	if obj.Status == http.StatusOK && needsServeContent(r) {
		cw := &countWriter{ResponseWriter: w, status: http.StatusOK}
		serveContent(cw, r, obj)
		res.Status, res.Bytes = cw.status, cw.n
		k.HitBytes.Add(uint64(cw.n))
		return
	}
	if obj.Status != http.StatusNoContent && obj.Status != http.StatusNotModified {
		h["Content-Length"] = clen
	}
	w.WriteHeader(obj.Status)
	res.Status = obj.Status
	if r.Method != http.MethodHead {
		n, _ := w.Write(obj.Body)
		res.Bytes = int64(n)
		k.HitBytes.Add(uint64(n))
	}
}

// needsServeContent reports whether r asks for a range or is
// conditional.
func needsServeContent(r *http.Request) bool {
	for _, k := range conditionalHeaders {
		if _, ok := r.Header[k]; ok {
			return true
		}
	}
	return false
}

// serveContent answers a range or conditional request from obj.
func serveContent(w http.ResponseWriter, r *http.Request, obj *Object) {
	if rg := r.Header.Get("Range"); strings.Count(rg, ",") >= maxRanges {
		r2 := *r
		r2.Header = r.Header.Clone()
		delete(r2.Header, "Range")
		r = &r2
	}
	h := w.Header()
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil // never sniff one: the origin sent none
	}
	var mod time.Time
	if lm := h.Get("Last-Modified"); lm != "" {
		mod, _ = cdnpolicy.ParseHTTPDate(lm)
	}
	http.ServeContent(w, r, "", mod, bytes.NewReader(obj.Body))
}

// countWriter counts the body bytes and keeps the status written.
type countWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (cw *countWriter) WriteHeader(s int) {
	cw.status = s
	cw.ResponseWriter.WriteHeader(s)
}

func (cw *countWriter) Write(p []byte) (int, error) {
	n, err := cw.ResponseWriter.Write(p)
	cw.n += int64(n)
	return n, err
}

func (cw *countWriter) Unwrap() http.ResponseWriter { return cw.ResponseWriter }
