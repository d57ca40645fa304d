package route

import (
	"strings"
	"testing"
)

func TestTemplateMatch(t *testing.T) {
	tests := []struct {
		tmpl, path string
		want       bool
		caps       string // "name=value,..." in variable order
	}{
		{"/a/*", "/a/b", true, ""},
		{"/a/*", "/a/", false, ""},
		{"/a/*", "/a/b/c", false, ""},
		{"/a/**", "/a/b/c", true, ""},
		{"/a/**", "/a/", true, ""},
		{"/a/**", "/a", false, ""},
		{"/{x}", "/hello", true, "x=hello"},
		{"/{x=*}/{y}", "/1/2", true, "x=1,y=2"},
		{"/{x=**}", "/1/2/3", true, "x=1/2/3"},
		{"/n/{x=news/*}/z", "/n/news/today/z", true, "x=news/today"},
		{"/n/{x=news/*}/z", "/n/sport/today/z", false, ""},
		{"/{a=*/news/*}", "/uk/news/today", true, "a=uk/news/today"},
		{"/videos/*/{id}/{seg=**}.ts", "/videos/hd/42/x/y.ts", true, "id=42,seg=x/y"},
		{"/videos/*/{id}/{seg=**}.ts", "/videos/hd/42/x/y.mp4", false, ""},
		{"/{name}.png", "/logo.png", true, "name=logo"},
		{"/{name}.png", "/.png", false, ""},
		{"/a%2Fb/{x}", "/a%2Fb/c", true, "x=c"},
		{"/a/{x}", "/a/b%2Fc", true, "x=b%2Fc"},
		{"/exact", "/exact", true, ""},
		{"/exact", "/exactly", false, ""},
	}
	for _, tc := range tests {
		tm, err := compileTemplate(tc.tmpl)
		if err != nil {
			t.Errorf("compileTemplate(%q): %v", tc.tmpl, err)
			continue
		}
		var caps captures
		if got := tm.match(tc.path, &caps); got != tc.want {
			t.Errorf("%q.match(%q) = %v, want %v", tc.tmpl, tc.path, got, tc.want)
			continue
		}
		if !tc.want {
			continue
		}
		var got []string
		for i, v := range tm.vars {
			got = append(got, v+"="+tc.path[caps[i][0]:caps[i][1]])
		}
		if s := strings.Join(got, ","); s != tc.caps {
			t.Errorf("%q.match(%q) captures %q, want %q", tc.tmpl, tc.path, s, tc.caps)
		}
	}
}

func TestTemplateErrors(t *testing.T) {
	for _, tmpl := range []string{
		"a/*",              // no leading slash
		"/a*",              // operator mid-segment
		"/**/x/*",          // ** not last
		"/{x}/{x}",         // duplicate variable
		"/{1x}",            // bad name
		"/{x",              // unclosed
		"/x}",              // unmatched
		"/{x={y}}",         // nested
		"/a/{x}{y}",        // operator mid-segment
		"/***",             // not an operator
		"/*/*/*/*/*/*",     // more than 5 operators
		"/v{version}/item", // variable mid-segment
	} {
		if _, err := compileTemplate(tmpl); err == nil {
			t.Errorf("compileTemplate(%q) succeeded, want an error", tmpl)
		}
	}
}

func TestQueryDecoding(t *testing.T) {
	tests := []struct {
		raw, name string
		val       string
		ok        bool
	}{
		{"a=1&b=2", "b", "2", true},
		{"a=1&a=2", "a", "1", true},
		{"a%20b=x", "a b", "x", true},
		{"flag", "flag", "", true},
		{"flag=", "flag", "", true},
		{"x=1", "y", "", false},
		{"", "x", "", false},
		{"&&x=%zz", "x", "%zz", true},
	}
	for _, tc := range tests {
		v, ok := queryParam(tc.raw, tc.name)
		if ok != tc.ok || decode(v) != tc.val {
			t.Errorf("queryParam(%q, %q) = %q, %v; want %q, %v", tc.raw, tc.name, decode(v), ok, tc.val, tc.ok)
		}
	}
	for _, tc := range []struct {
		enc, want string
		eq        bool
	}{
		{"a%41", "aA", true}, {"a+b", "a b", true}, {"%", "%", true}, {"%4", "%4", true}, {"ab", "abc", false}, {"abc", "ab", false},
	} {
		if got := decodedEqual(tc.enc, tc.want); got != tc.eq {
			t.Errorf("decodedEqual(%q, %q) = %v", tc.enc, tc.want, got)
		}
		if got := decode(tc.enc) == tc.want; got != tc.eq {
			t.Errorf("decode(%q) = %q", tc.enc, decode(tc.enc))
		}
	}
}

func TestParseInt64(t *testing.T) {
	for _, tc := range []struct {
		s  string
		n  int64
		ok bool
	}{
		{"0", 0, true}, {"-3", -3, true}, {"+7", 7, true}, {"9223372036854775807", 1<<63 - 1, true},
		{"-9223372036854775808", -1 << 63, true}, {"9223372036854775808", 0, false}, {"0.25", 0, false},
		{"-3abc", 0, false}, {"", 0, false}, {"-", 0, false}, {" 1", 0, false}, {"99999999999999999999", 0, false},
	} {
		n, ok := parseInt64(tc.s)
		if n != tc.n || ok != tc.ok {
			t.Errorf("parseInt64(%q) = %d, %v; want %d, %v", tc.s, n, ok, tc.n, tc.ok)
		}
	}
}

func TestSplitPort(t *testing.T) {
	for _, tc := range []struct{ in, name, port string }{
		{"a.com", "a.com", ""}, {"a.com:80", "a.com", "80"}, {"[::1]:8080", "[::1]", "8080"}, {"[::1]", "[::1]", ""}, {"::1", "::1", ""}, {":80", "", "80"},
	} {
		name, port, _ := splitPort(tc.in)
		if name != tc.name || port != tc.port {
			t.Errorf("splitPort(%q) = %q, %q", tc.in, name, port)
		}
	}
}
