package route

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spillwaylb/spillway/internal/config"
)

// TestFailure is one failed check of a URL map test (urlMaps[].tests[]).
type TestFailure struct {
	// Index is the test's position in the tests list.
	Index int
	// Test is the test as configured.
	Test config.URLMapTest
	// Want and Got describe the expectation and the outcome, each prefixed
	// with what was compared ("service web-v2", "redirect code 301",
	// "url http://…").
	Want, Got string
}

// String formats the failure as "tests[i] host=… path=…: want …, got …".
func (f TestFailure) String() string {
	return fmt.Sprintf("tests[%d] host=%s path=%s: want %s, got %s", f.Index, f.Test.Host, f.Test.Path, f.Want, f.Got)
}

// RunTests evaluates Google-style URL map tests and returns the failures
// (none when all pass). Each test is a GET of http://host/path (path may
// include "?query") with the given headers; a "Host" header overrides host.
//
//   - service: compared by name (RefName) with the picked rule's service; for
//     a weighted split, with the service of the highest weight.
//   - expectedRedirectResponseCode: the rule must redirect with that code.
//   - expectedOutputUrl: for a redirect, the Location (the request scheme
//     is http); otherwise the forwarded URL after urlRewrite, compared
//     without its scheme, as Google does.
func (t *Table) RunTests(tests []config.URLMapTest) []TestFailure {
	var out []TestFailure
	for i, tc := range tests {
		r := testRequest(tc)
		a := t.Match(r)
		fail := func(want, got string) {
			out = append(out, TestFailure{Index: i, Test: tc, Want: want, Got: got})
		}
		got := describe(a, r)
		if tc.Service != "" {
			want := "service " + config.RefName(tc.Service)
			if a.Redirect != nil || a.primary() != config.RefName(tc.Service) {
				fail(want, got)
			}
		}
		if tc.ExpectedRedirectResponseCode != 0 {
			want := "redirect " + strconv.Itoa(tc.ExpectedRedirectResponseCode)
			if a.Redirect == nil || a.Redirect.Code != tc.ExpectedRedirectResponseCode {
				fail(want, got)
			}
		}
		if tc.ExpectedOutputURL != "" {
			want := "url " + tc.ExpectedOutputURL
			if a.Redirect != nil {
				if loc := a.RedirectURL(r, "http"); loc != tc.ExpectedOutputURL {
					fail(want, "url "+loc)
				}
			} else if u := forwardedURL(a, r); stripScheme(u) != stripScheme(tc.ExpectedOutputURL) {
				fail(want, "url "+u)
			}
		}
	}
	return out
}

// testRequest builds the request a URL map test describes.
func testRequest(tc config.URLMapTest) *Request {
	path, query, _ := strings.Cut(tc.Path, "?")
	path, _, _ = strings.Cut(path, "#")
	r := &Request{Host: tc.Host, Path: path, RawQuery: query, Method: "GET"}
	headers := tc.Headers
	for _, h := range headers {
		if strings.EqualFold(h.Name, "host") {
			r.Host = h.Value
		}
	}
	if len(headers) > 0 {
		r.Header = func(name string) (string, bool) {
			for _, h := range headers {
				if strings.EqualFold(h.Name, name) {
					return h.Value, true
				}
			}
			return "", false
		}
	}
	return r
}

// forwardedURL is the URL a forwarding action sends to the backend.
func forwardedURL(a *Action, r *Request) string {
	host, path := a.RewriteURL(r)
	u := "http://" + host + path
	if r.RawQuery != "" {
		u += "?" + r.RawQuery
	}
	return u
}

func stripScheme(u string) string {
	if _, rest, ok := strings.Cut(u, "://"); ok {
		return rest
	}
	return u
}

// describe summarises what an action does with a request, for failures.
func describe(a *Action, r *Request) string {
	if a.Redirect != nil {
		return fmt.Sprintf("redirect %d to %s (%s)", a.Redirect.Code, a.RedirectURL(r, "http"), a.Source)
	}
	return fmt.Sprintf("service %s, url %s (%s)", a.primary(), forwardedURL(a, r), a.Source)
}
