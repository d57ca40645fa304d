package waf

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"sort"
	"strings"
	"testing"

	crstests "github.com/corazawaf/coraza-coreruleset/v4/tests"
	"go.yaml.in/yaml/v3"
)

// The CRS's own regression tests (go-ftw's YAML format), embedded by
// github.com/corazawaf/coraza-coreruleset/v4/tests: only what this
// harness reads.
type ftwFile struct {
	RuleID int       `yaml:"rule_id"`
	Tests  []ftwTest `yaml:"tests"`
}

type ftwTest struct {
	TestID int        `yaml:"test_id"`
	Stages []ftwStage `yaml:"stages"`
}

type ftwStage struct {
	Input struct {
		Method              *string           `yaml:"method"`
		URI                 *string           `yaml:"uri"`
		Version             *string           `yaml:"version"`
		Headers             map[string]string `yaml:"headers"`
		Data                string            `yaml:"data"`
		EncodedRequest      string            `yaml:"encoded_request"`
		AutocompleteHeaders *bool             `yaml:"autocomplete_headers"`
	} `yaml:"input"`
	Output struct {
		ExpectError bool `yaml:"expect_error"`
		Log         struct {
			ExpectIDs   []int `yaml:"expect_ids"`
			NoExpectIDs []int `yaml:"no_expect_ids"`
		} `yaml:"log"`
	} `yaml:"output"`
}

// crsCase is one stage of one CRS regression test.
type crsCase struct {
	file   string // e.g. REQUEST-942-APPLICATION-ATTACK-SQLI/942100.yaml
	testID int
	stage  ftwStage
}

func (c crsCase) String() string { return fmt.Sprintf("%s test %d", c.file, c.testID) }

// loadCRSCases reads every regression test of the category files.
func loadCRSCases(t testing.TB) []crsCase {
	t.Helper()
	var out []crsCase
	seen := map[string]bool{}
	for _, cat := range categories {
		dir := strings.TrimSuffix(cat.file, ".conf")
		if seen[dir] {
			continue
		}
		seen[dir] = true
		entries, err := fs.ReadDir(crstests.FS, dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, ent := range entries {
			name := dir + "/" + ent.Name()
			b, err := fs.ReadFile(crstests.FS, name)
			if err != nil {
				t.Fatal(err)
			}
			var f ftwFile
			if err := yaml.Unmarshal(b, &f); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, tc := range f.Tests {
				for _, st := range tc.Stages {
					out = append(out, crsCase{file: name, testID: tc.TestID, stage: st})
				}
			}
		}
	}
	return out
}

// raw renders the stage's request as go-ftw sends it: the encoded
// request as is, else the request line, the headers (sorted, as YAML
// maps have no order), and the data, with Content-Length and
// Connection: close added unless autocomplete_headers is false.
func (c crsCase) raw() ([]byte, error) {
	in := c.stage.Input
	if in.EncodedRequest != "" {
		return base64.StdEncoding.DecodeString(in.EncodedRequest)
	}
	method, uri, version := "GET", "/", "HTTP/1.1"
	if in.Method != nil {
		method = *in.Method
	}
	if in.URI != nil {
		uri = *in.URI
	}
	if in.Version != nil {
		version = *in.Version
	}
	headers := map[string]string{}
	for k, v := range in.Headers {
		headers[k] = v
	}
	if in.AutocompleteHeaders == nil || *in.AutocompleteHeaders {
		if in.Data != "" && !hasHeader(headers, "Content-Length") && !hasHeader(headers, "Transfer-Encoding") {
			headers["Content-Length"] = fmt.Sprint(len(in.Data))
		}
		headers["Connection"] = "close"
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s\r\n", method, uri, version)
	for _, k := range names {
		fmt.Fprintf(&b, "%s: %s\r\n", k, headers[k])
	}
	b.WriteString("\r\n")
	b.WriteString(in.Data)
	return []byte(b.String()), nil
}

func hasHeader(h map[string]string, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// crsSample picks CRS regression tests, rule file and test_id, a few per
// rule set and paranoia level 1 to 4.
var crsSample = []struct {
	rule, testID int
}{
	{911100, 5}, {911100, 7},
	{913100, 1}, {913100, 4},
	{921110, 1}, {921140, 2}, {921160, 1}, {921180, 4},
	{930100, 1}, {930110, 1}, {930120, 1},
	{931100, 1}, {931110, 1}, {931130, 1},
	{932160, 1}, {932230, 13}, {932236, 1}, {932200, 1},
	{933100, 1}, {933150, 1}, {933151, 1},
	{934100, 1}, {934130, 2}, {934101, 1},
	{941100, 1}, {941160, 1}, {941320, 1},
	{942100, 1}, {942140, 1}, {942200, 1}, {942251, 1}, {942300, 1}, {942421, 1}, {942432, 1},
	{943100, 1}, {943110, 1}, {943120, 1},
	{944100, 1}, {944150, 1}, {944130, 1}, {944300, 1}, {944152, 1},
}

// TestCRSRegressionSample sends a sample of the CRS's own regression
// tests, byte for byte, to a net/http server on loopback running every
// set (CRS 3.3 names) at every sensitivity: each signature a test expects
// is reported by its set at the sensitivity equal to its paranoia level.
func TestCRSRegressionSample(t *testing.T) {
	c := newCompilerT(t)
	var refs []SetRef
	for s := 1; s <= 4; s++ {
		for _, cat := range crsVersions[1].cats {
			refs = append(refs, refsAt(t, s, cat+"-v33-stable")...)
		}
	}
	srv := serve(t, compileT(t, c, refs, Options{JSONParsing: true, MaxBodyBytes: MaxMaxBodyBytes}))
	byCase := map[[2]int][]crsCase{}
	for _, cc := range loadCRSCases(t) {
		var rule int
		if _, err := fmt.Sscanf(cc.file[strings.LastIndexByte(cc.file, '/')+1:], "%d.yaml", &rule); err != nil {
			t.Fatalf("%s: %v", cc.file, err)
		}
		byCase[[2]int{rule, cc.testID}] = append(byCase[[2]int{rule, cc.testID}], cc)
	}
	for _, sc := range crsSample {
		stages := byCase[[2]int{sc.rule, sc.testID}]
		if len(stages) == 0 {
			t.Fatalf("the CRS has no test %d of rule %d", sc.testID, sc.rule)
		}
		for _, cc := range stages {
			checked := 0
			raw, err := cc.raw()
			if err != nil {
				t.Fatal(err)
			}
			v, ok := doRaw(t, srv, raw)
			if !ok {
				t.Errorf("%s: the server refused it", cc)
				continue
			}
			for _, id := range cc.stage.Output.Log.ExpectIDs {
				level, ok := c.index[id]
				if !ok {
					continue // a rule outside the preconfigured sets (920, 949...)
				}
				checked++
				def, _ := lookupSet(v33Set(id))
				if !containsString(v.at(def.name, level), def.googleID(id)) {
					t.Errorf("%s: %s at sensitivity %d did not report %s: %v", cc, def.name, level, def.googleID(id), v.Matched)
				}
			}
			if checked == 0 {
				t.Errorf("%s expects no preconfigured signature; pick a positive test", cc)
			}
		}
	}
}

// v33Set names the CRS 3.3 set holding rule id.
func v33Set(id int) string {
	for _, c := range crsVersions[1].cats {
		if categoryByName(c).prefix == id/1000 {
			return c + "-v33-stable"
		}
	}
	panic(fmt.Sprintf("no set holds rule %d", id))
}

// crsEngine evaluates every category at sensitivity 4 (so each rule runs)
// with JSON parsing on and Google's largest body limit, as the CRS's tests
// expect of a WAF.
func crsEngine(t testing.TB, c *Compiler) (*Engine, map[int]string) {
	names := []string{}
	setOf := map[int]string{} // category prefix → set name
	for _, cat := range crsVersions[0].cats {
		n := cat + "-v422-stable"
		names = append(names, n)
		setOf[categoryByName(cat).prefix] = n
	}
	return compileT(t, c, refsAt(t, 4, names...), Options{JSONParsing: true, MaxBodyBytes: MaxMaxBodyBytes}), setOf
}

// TestCRSRegressionAll runs every CRS regression test of the
// preconfigured sets' rule files in process (net/http's own request
// parser, then Evaluate) with every set at sensitivity 4: each signature a
// test expects is reported, and none it expects absent. The exceptions are
// XML bodies, which the CRS's tests read with Coraza's XML parser and
// Spillway, like Google, inspects whole; they are counted, not failed.
func TestCRSRegressionAll(t *testing.T) {
	if testing.Short() {
		t.Skip("about 4,000 requests; -short runs TestCRSRegressionSample only")
	}
	c := newCompilerT(t)
	e, setOf := crsEngine(t, c)
	var n crsCounts
	for _, cc := range loadCRSCases(t) {
		n.add(t, c, e, setOf, cc)
	}
	t.Logf("expected signatures reported %d/%d; absent as expected %d/%d; XML bodies differing %d; requests net/http refuses %d",
		n.posOK, n.pos, n.negOK, n.neg, n.xml, n.refused)
	if n.pos < 3000 || n.neg < 500 {
		t.Errorf("only %d positive and %d negative checks ran; the CRS ships over 3,000 and 500", n.pos, n.neg)
	}
}

// crsCounts tallies TestCRSRegressionAll.
type crsCounts struct {
	pos, posOK, neg, negOK, xml, refused int
}

// add runs one case and counts it, failing t on a difference outside XML
// bodies.
func (n *crsCounts) add(t *testing.T, c *Compiler, e *Engine, setOf map[int]string, cc crsCase) {
	var want, notWant []int
	for _, id := range cc.stage.Output.Log.ExpectIDs {
		if _, ok := c.index[id]; ok {
			want = append(want, id)
		}
	}
	for _, id := range cc.stage.Output.Log.NoExpectIDs {
		if _, ok := c.index[id]; ok {
			notWant = append(notWant, id)
		}
	}
	if len(want)+len(notWant) == 0 {
		return
	}
	raw, err := cc.raw()
	if err != nil {
		t.Fatal(err)
	}
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		n.refused++
		return
	}
	r.RemoteAddr = "127.0.0.1:40000"
	body, _ := io.ReadAll(io.LimitReader(r.Body, MaxMaxBodyBytes+1))
	res := e.Evaluate(r, body)
	reported := func(id int) bool {
		for i, ref := range e.Sets() {
			if ref.Set == setOf[id/1000] {
				def, _ := lookupSet(ref.Set)
				return containsString(res.Sets[i].IDs, def.googleID(id))
			}
		}
		return false
	}
	xml := strings.Contains(strings.ToLower(r.Header.Get("Content-Type")), "xml")
	for _, id := range want {
		n.pos++
		switch {
		case reported(id):
			n.posOK++
		case xml:
			n.xml++
		default:
			t.Errorf("%s: %d not reported (%+v)", cc, id, res.Sets)
		}
	}
	for _, id := range notWant {
		n.neg++
		switch {
		case !reported(id):
			n.negOK++
		case xml:
			n.xml++
		default:
			t.Errorf("%s: %d reported, the CRS expects it not to be", cc, id)
		}
	}
}
