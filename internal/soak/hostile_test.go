package soak

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMalformedInBody: a malformed case whose head net/http reads as a
// valid request with a body has its mistake in the body, which the proxy
// reads only while forwarding, so it must be marked inBody (its 503
// failed_to_connect_to_backend in a convergence window is then judged
// like the steady load's). "truncated body" was not, and a 10-minute soak
// failed on one such 503 right after a zone was killed.
func TestMalformedInBody(t *testing.T) {
	for _, mc := range malformedCases() {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(mc.raw)))
		if err != nil {
			continue // a bad head: the proxy refuses it before any backend
		}
		if req.ContentLength == 0 && len(req.TransferEncoding) == 0 {
			continue
		}
		_, bodyErr := io.Copy(io.Discard, req.Body)
		if bodyErr == nil {
			continue // net/http reads the whole body: not a body mistake
		}
		if !mc.inBody {
			t.Errorf("%s: the head is valid and the body is not (%v), but the case is not marked inBody", mc.name, bodyErr)
		}
	}
}
