package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// callAdmin sends one request to the admin API of the spillway serve at
// admin (with the bearer token when there is one) and returns the body
// of its 200 answer. Every other outcome is an error that says what to
// fix: the server not reachable, a token wanted, an endpoint the server
// does not have (it is older than this command), or the server's own
// refusal. The call gives up after 60 s.
func callAdmin(ctx context.Context, admin, token, method, path string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+admin+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the admin API at %s: %w (is 'spillway serve' running with --admin %s?)", admin, err, admin)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the admin API's answer: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return b, nil
	case http.StatusUnauthorized:
		return nil, fmt.Errorf("the admin API at %s wants a token (fix: give it with --admin-token-file FILE or %s)", admin, adminTokenEnv)
	case http.StatusNotFound:
		return nil, fmt.Errorf("the admin API at %s has no %s: the server is older than this command (fix: upgrade it)", admin, path)
	default:
		return nil, fmt.Errorf("the admin API at %s refused (%s): %s", admin, resp.Status, strings.TrimSpace(string(b)))
	}
}
