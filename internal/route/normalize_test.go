package route

import (
	"errors"
	"strings"
	"testing"

	"github.com/spillwaylb/spillway/internal/config"
)

func TestNormalizePath(t *testing.T) {
	keep := PathOptions{}
	reject := PathOptions{EscapedSlashes: EscapedSlashesReject}
	unescape := PathOptions{EscapedSlashes: EscapedSlashesUnescape}
	slashes := PathOptions{KeepSlashes: true}
	off := PathOptions{Off: true}
	for _, tc := range []struct {
		in   string
		o    PathOptions
		want string
		err  error
	}{
		// Already normal: unchanged.
		{"/", keep, "/", nil},
		{"/a/b/c", keep, "/a/b/c", nil},
		{"/a/b/", keep, "/a/b/", nil},
		{"/a%20b/%C3%A9", keep, "/a%20b/%C3%A9", nil},
		{"/.well-known/x", keep, "/.well-known/x", nil},
		{"/a/...", keep, "/a/...", nil},
		{"/a..b/c.", keep, "/a..b/c.", nil},
		{"*", keep, "*", nil},
		// The five bypasses of issue 9.
		{"/public/../secret/x", keep, "/secret/x", nil},
		{"/./secret/x", keep, "/secret/x", nil},
		{"//secret/x", keep, "/secret/x", nil},
		{"/%2e%2e/secret/x", keep, "/secret/x", nil},
		{"/%2e/secret/x", keep, "/secret/x", nil},
		// RFC 3986 §5.2.4 and §5.4 examples on absolute paths.
		{"/a/b/c/./../../g", keep, "/a/g", nil},
		{"/mid/content=5/../6", keep, "/mid/6", nil},
		{"/a/b/..", keep, "/a/", nil},
		{"/a/b/.", keep, "/a/b/", nil},
		{"/..", keep, "/", nil},
		{"/../../x", keep, "/x", nil},
		{"/.", keep, "/", nil},
		{"/a/.%2E/b", keep, "/b", nil},
		{"/a/%2E%2e", keep, "/", nil},
		// Unreserved escapes decoded, others upper-cased.
		{"/%41%62%7e%2d", keep, "/Ab~-", nil},
		{"/a%3fb%2a", keep, "/a%3Fb%2A", nil},
		{"/%00/%0d%0a", keep, "/%00/%0D%0A", nil},
		// Slashes.
		{"/a//b///c//", keep, "/a/b/c/", nil},
		{"//", keep, "/", nil},
		{"/a//../b", slashes, "/a/b", nil},
		{"//secret/x", slashes, "//secret/x", nil},
		{"/a//b/./c", slashes, "/a//b/c", nil},
		// Escaped slashes and backslashes.
		{"/a%2fb", keep, "/a%2Fb", nil},
		{"/public/..%2Fsecret", keep, "/public/..%2Fsecret", nil},
		{"/a\\b", keep, "/a%5Cb", nil},
		{"/a%2Fb", reject, "", ErrEscapedSlash},
		{"/a%5cb", reject, "", ErrEscapedSlash},
		{"/a\\b", reject, "", ErrEscapedSlash},
		{"/public/..%2Fsecret/x", unescape, "/secret/x", nil},
		{"/public\\..\\secret", unescape, "/secret", nil},
		{"/a%5Cb", unescape, "/a/b", nil},
		// Odd inputs.
		{"", keep, "/", nil},
		{"a/b", keep, "/a/b", nil},
		{"/a%2", keep, "", ErrBadEscape},
		{"/a%zz", keep, "", ErrBadEscape},
		// Off.
		{"/public/../secret/x", off, "/public/../secret/x", nil},
		{"//x", off, "//x", nil},
	} {
		got, err := NormalizePath(tc.in, tc.o)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("NormalizePath(%q, %+v) = %q, %v; want %q, %v", tc.in, tc.o, got, err, tc.want, tc.err)
		}
	}
}

func TestMatchPath(t *testing.T) {
	for _, tc := range []struct {
		in   string
		o    PathOptions
		want string
	}{
		{"/a/b", PathOptions{}, "/a/b"},
		{"/public/../secret", PathOptions{}, "/secret"}, // from /public/..%2Fsecret
		{"/public/..\\secret", PathOptions{}, "/secret"},
		{"/a\\b", PathOptions{}, "/a/b"},
		{"/a//b", PathOptions{}, "/a/b"},
		{"/a//b", PathOptions{KeepSlashes: true}, "/a//b"},
		{"/a/../b", PathOptions{Off: true}, "/a/../b"},
		{"", PathOptions{}, "/"},
	} {
		if got := MatchPath(tc.in, tc.o); got != tc.want {
			t.Errorf("MatchPath(%q, %+v) = %q, want %q", tc.in, tc.o, got, tc.want)
		}
	}
}

func TestPathOptionsFor(t *testing.T) {
	f := false
	tr := true
	for _, tc := range []struct {
		t    *config.Tuning
		want PathOptions
	}{
		{nil, PathOptions{}},
		{&config.Tuning{}, PathOptions{}},
		{&config.Tuning{NormalizePath: &tr, MergeSlashes: &tr}, PathOptions{}},
		{&config.Tuning{NormalizePath: &f}, PathOptions{Off: true}},
		{&config.Tuning{MergeSlashes: &f, PathWithEscapedSlashesAction: EscapedSlashesReject}, PathOptions{KeepSlashes: true, EscapedSlashes: EscapedSlashesReject}},
	} {
		if got := PathOptionsFor(tc.t); got != tc.want {
			t.Errorf("PathOptionsFor(%+v) = %+v, want %+v", tc.t, got, tc.want)
		}
	}
}

func TestNormalizePathDoesNotAllocateWhenNormal(t *testing.T) {
	for _, p := range []string{"/", "/api/v40/items", "/a%20b/c", "/static/x.png"} {
		if n := testing.AllocsPerRun(100, func() {
			q, _ := NormalizePath(p, PathOptions{})
			MatchPath(q, PathOptions{})
		}); n != 0 {
			t.Errorf("%q: %v allocations", p, n)
		}
	}
}

// FuzzNormalizePath checks the normaliser's invariants: the result starts
// with '/', has no dot segments (so it cannot climb above the root), has
// no empty segments when slashes are merged, has only upper-case escapes
// of reserved characters, and normalising it again changes nothing; the
// match view has the same properties on the decoded path.
func FuzzNormalizePath(f *testing.F) {
	for _, s := range []string{"/", "/a/../b", "//x", "/%2e%2E/", "/a%2fb/..%2F..", "/a\\..\\b", "/%41", "", "x/./y", "/%", "/a/./", "/a%2Fb/\xc3\xa9", "/{x}|"} {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, p string, mode uint8) {
		o := PathOptions{KeepSlashes: mode&1 != 0}
		switch mode >> 1 & 3 {
		case 1:
			o.EscapedSlashes = EscapedSlashesReject
		case 2:
			o.EscapedSlashes = EscapedSlashesUnescape
		}
		if p == "*" {
			return
		}
		n, err := NormalizePath(p, o)
		if err != nil {
			return
		}
		checkNormal(t, "NormalizePath", p, n, o)
		for i := 0; i+2 < len(n); i++ {
			if n[i] == '%' {
				if !isUpperHex(n[i+1]) || !isUpperHex(n[i+2]) || unreserved(hexPair(n[i+1], n[i+2])) {
					t.Fatalf("NormalizePath(%q) = %q: escape %q", p, n, n[i:i+3])
				}
			}
		}
		for i := 0; i < len(n); i++ {
			if n[i] != '%' && !pathByte(n[i]) {
				t.Fatalf("NormalizePath(%q) = %q: raw %q is not a path character (url.URL would drop it as RawPath)", p, n, n[i])
			}
		}
		if again, err := NormalizePath(n, o); again != n || err != nil {
			t.Fatalf("NormalizePath not idempotent: %q → %q → %q, %v", p, n, again, err)
		}
		m := MatchPath(p, o)
		checkNormal(t, "MatchPath", p, m, o)
		if strings.IndexByte(m, '\\') >= 0 {
			t.Fatalf("MatchPath(%q) = %q: backslash", p, m)
		}
		if again := MatchPath(m, o); again != m {
			t.Fatalf("MatchPath not idempotent: %q → %q → %q", p, m, again)
		}
	})
}

func checkNormal(t *testing.T, fn, in, out string, o PathOptions) {
	t.Helper()
	if out == "" || out[0] != '/' {
		t.Fatalf("%s(%q) = %q: does not start with '/'", fn, in, out)
	}
	segs := strings.Split(out[1:], "/")
	for i, s := range segs {
		if s == "." || s == ".." {
			t.Fatalf("%s(%q) = %q: dot segment", fn, in, out)
		}
		if s == "" && !o.KeepSlashes && i < len(segs)-1 {
			t.Fatalf("%s(%q) = %q: empty segment", fn, in, out)
		}
	}
}

func TestRedirectURLEscapesPath(t *testing.T) {
	um := &config.URLMap{
		Name:           "um",
		DefaultService: "bs",
		HostRules:      []config.HostRule{{Hosts: []string{"*"}, PathMatcher: "pm"}},
		PathMatchers: []config.PathMatcher{{
			Name:           "pm",
			DefaultService: "bs",
			RouteRules: []config.HTTPRouteRule{
				{Priority: 1, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/old/"}}, URLRedirect: &config.HTTPRedirectAction{PrefixRedirect: "/new/"}},
				{Priority: 2, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/é/"}}, URLRedirect: &config.HTTPRedirectAction{PrefixRedirect: "/e/"}},
				{Priority: 3, MatchRules: []config.HTTPRouteRuleMatch{{PrefixMatch: "/tls/"}}, URLRedirect: &config.HTTPRedirectAction{HTTPSRedirect: true}},
			},
		}},
	}
	tab := mustCompile(t, um)
	for _, tc := range []struct {
		path, escaped, want string
	}{
		{"/old/a\x00b", "", "http://h/new/a%00b"},
		{"/old/a\r\nb?c", "", "http://h/new/a%0D%0Ab%3Fc"},
		{"/old/a?b", "/old/a%3Fb", "http://h/new/a%3Fb"},
		{"/old/a/b", "/old/a%2Fb", "http://h/new/a%2Fb"},
		{"/é/x y", "/%C3%A9/x%20y", "http://h/e/x%20y"},
		{"/é/x y", "", "http://h/e/x%20y"},
		{"/tls/a b", "", "https://h/tls/a%20b"},
		{"/tls/a%b", "/tls/a%25b", "https://h/tls/a%25b"},
	} {
		r := &Request{Host: "h", Path: tc.path, EscapedPath: tc.escaped, Method: "GET"}
		if got := tab.Match(r).RedirectURL(r, "http"); got != tc.want {
			t.Errorf("RedirectURL(%q, %q) = %q, want %q", tc.path, tc.escaped, got, tc.want)
		}
	}
}
