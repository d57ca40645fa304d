package route

import (
	"strings"
	"testing"
)

// FuzzMatch feeds random hosts, paths, queries and headers through the
// golden table: Match must never panic or return nil, and the action's
// helpers must cope with whatever matched.
func FuzzMatch(f *testing.F) {
	f.Add("www.example.com", "/", "", "x-canary", "always", "GET", uint64(0))
	f.Add("api.example.com:8443", "/geo", "a=1", "x-region", "eu-west", "POST", uint64(1))
	f.Add("[::1]:80", "/videos/us/en/a.m3u8", "user=alice%20smith", "x-tier", "-5", "", uint64(7))
	f.Add("API.EXAMPLE.COM", "/V2/", "id=%zz&&", ":authority", "", "DELETE", ^uint64(0))
	f.Add("", "", "", "", "", "", uint64(3))
	f.Add("static.example.com", "/static/x", "+", "x-auth", "", "GET", uint64(5))
	tab := mustCompile(f, goldenURLMap())
	f.Fuzz(func(t *testing.T, host, path, query, hname, hval, method string, u uint64) {
		r := &Request{Host: host, Path: path, RawQuery: query, Method: method, Header: func(name string) (string, bool) {
			if strings.EqualFold(name, hname) {
				return hval, true
			}
			return "", false
		}}
		a := tab.Match(r)
		if a == nil {
			t.Fatal("Match returned nil")
		}
		if a.Redirect != nil {
			if loc := a.RedirectURL(r, "http"); !strings.Contains(loc, "://") {
				t.Fatalf("RedirectURL = %q", loc)
			}
			return
		}
		name, i := a.PickService(u)
		if i < 0 || a.Services[i].Name != name || a.Services[i].Weight == 0 {
			t.Fatalf("PickService = %q, %d", name, i)
		}
		a.RewriteURL(r)
	})
}

// FuzzTemplate checks that compiling and matching arbitrary templates never
// panics and that a template without operators matches exactly itself.
func FuzzTemplate(f *testing.F) {
	f.Add("/{x=**}.ts", "/a/b.ts")
	f.Add("/a/*/{y=news/*}", "/a/b/news/c")
	f.Add("/plain", "/plain")
	f.Fuzz(func(t *testing.T, tmpl, path string) {
		tm, err := compileTemplate(tmpl)
		if err != nil {
			return
		}
		var caps captures
		if tm.match(path, &caps) {
			for i := range tm.vars {
				if caps[i][0] > caps[i][1] || caps[i][1] > len(path) {
					t.Fatalf("%q on %q: bad capture %v", tmpl, path, caps[i])
				}
			}
		}
		if !strings.ContainsAny(tmpl, "*{") && tm.match(path, nil) != (path == tmpl) {
			t.Fatalf("literal template %q vs %q", tmpl, path)
		}
	})
}
