package serve_test

import (
	"bufio"
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// h2specExceptions is the list of h2spec failures Spillway accepts, each
// with its reason (docs/reliability.md, "h2spec").
const h2specExceptions = "testdata/h2spec-exceptions.txt"

// h2specCase is one h2spec test case's outcome.
type h2specCase struct {
	id     string // h2spec's: section package and number, e.g. http2/6.5.3/1
	desc   string
	failed bool
	detail string
}

// junitReport is the part of h2spec's JUnit report read here.
type junitReport struct {
	Suites []struct {
		Package string `xml:"package,attr"`
		Cases   []struct {
			Desc    string  `xml:"classname,attr"`
			Error   *string `xml:"error"`
			Failure *string `xml:"failure"`
			Skipped *string `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// parseH2specReport returns the cases of an h2spec JUnit report and the
// number skipped. h2spec numbers the cases of a section from 1.
func parseH2specReport(b []byte) ([]h2specCase, int, error) {
	var r junitReport
	if err := xml.Unmarshal(b, &r); err != nil {
		return nil, 0, fmt.Errorf("h2spec JUnit report: %w", err)
	}
	var out []h2specCase
	skipped := 0
	for _, s := range r.Suites {
		for i, c := range s.Cases {
			if c.Skipped != nil {
				skipped++
				continue
			}
			hc := h2specCase{id: s.Package + "/" + strconv.Itoa(i+1), desc: c.Desc}
			for _, e := range []*string{c.Error, c.Failure} {
				if e != nil {
					hc.failed, hc.detail = true, strings.TrimSpace(*e)
				}
			}
			out = append(out, hc)
		}
	}
	return out, skipped, nil
}

// readH2specExceptions reads lines "ID FRONTENDS REASON" (FRONTENDS: h2c,
// tls or h2c,tls); # starts a comment. It returns frontend -> ID ->
// reason.
func readH2specExceptions(path string) (map[string]map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("h2spec exceptions: %w", err)
	}
	defer f.Close()
	out := map[string]map[string]string{"h2c": {}, "tls": {}}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 3 {
			return nil, fmt.Errorf("%s:%d: want ID FRONTENDS REASON, got %q", path, n, line)
		}
		for fe := range strings.SplitSeq(fields[1], ",") {
			if out[fe] == nil {
				return nil, fmt.Errorf("%s:%d: frontend %q, want h2c or tls", path, n, fe)
			}
			out[fe][fields[0]] = strings.Join(fields[2:], " ")
		}
	}
	return out, sc.Err()
}

// TestH2spec runs h2spec (github.com/summerwind/h2spec, path in
// SPILLWAY_H2SPEC; scripts/h2spec.sh installs it) against a cleartext
// frontend (h2c with prior knowledge) and an HTTPS one (h2 by ALPN), on
// both HTTP/1.1 server loops and both HTTP/2 server loops, all eight at once, strict cases included
// (-S). It fails on any failure not listed in
// testdata/h2spec-exceptions.txt, and on an exception that no longer
// fails. Without SPILLWAY_H2SPEC it skips, unless SPILLWAY_REQUIRE_H2SPEC
// is set (CI).
func TestH2spec(t *testing.T) {
	bin := os.Getenv("SPILLWAY_H2SPEC")
	if bin == "" {
		if os.Getenv("SPILLWAY_REQUIRE_H2SPEC") != "" {
			t.Fatal("SPILLWAY_REQUIRE_H2SPEC is set but SPILLWAY_H2SPEC is not (scripts/h2spec.sh installs h2spec and sets it)")
		}
		t.Skip("SPILLWAY_H2SPEC is not set; scripts/h2spec.sh installs h2spec and runs this test")
	}
	exceptions, err := readH2specExceptions(h2specExceptions)
	if err != nil {
		t.Fatal(err)
	}
	// h2spec needs a response body of at least 5 bytes on / for its
	// flow-control cases.
	be := startBackend(t, "h2spec-backend")
	ca := newCA(t, "h2spec CA")
	cert, key := ca.writePair(t, t.TempDir(), "fe", "localhost", []string{"localhost"}, false)
	fes := `{name: h2c, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}
- ` + httpsFrontend("tls", "127.0.0.2", cert, key) + "}"
	// Both HTTP/1.1 server loops, reaching HTTP/2 by different
	// hand-offs, times both HTTP/2 server loops.
	type target struct {
		loop, frontend, addr string
		flags                []string
	}
	var targets []target
	for _, h2loop := range []string{"NET_HTTP", "SPILLWAY"} {
		for _, loop := range []string{"SPILLWAY", "NET_HTTP"} {
			y := oneServiceYAML(be.addr, fes, "spillway: {http1Server: "+loop+", http2Server: "+h2loop+"}\n")
			s := servetest.Run(t, servetest.Parse(t, y), serve.Options{WatchInterval: -1})
			name := "http1Server=" + loop + " http2Server=" + h2loop
			targets = append(targets,
				target{name, "h2c", s.FrontendAddr("h2c"), nil},
				target{name, "tls", s.FrontendAddr("tls"), []string{"-t", "-k"}})
		}
	}
	results := make([][]h2specCase, len(targets))
	skipped := make([]int, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, tg := range targets {
		wg.Go(func() {
			results[i], skipped[i], errs[i] = runH2spec(t, bin, tg.addr, tg.flags)
		})
	}
	wg.Wait()
	for i, tg := range targets {
		name, excused := tg.loop+" "+tg.frontend, exceptions[tg.frontend]
		if errs[i] != nil {
			t.Errorf("%s: %v", name, errs[i])
			continue
		}
		failed, listed := 0, 0
		seen := map[string]bool{}
		for _, c := range results[i] {
			seen[c.id] = true
			if !c.failed {
				if reason, ok := excused[c.id]; ok {
					t.Errorf("%s: %s (%s) passes now; remove it from %s (it was excused: %s)", name, c.id, c.desc, h2specExceptions, reason)
				}
				continue
			}
			if (resetRace(c) || timedOut(c)) && rerunPasses(t, bin, tg.addr, tg.flags, c.id) {
				continue
			}
			failed++
			if _, ok := excused[c.id]; ok {
				listed++
			} else {
				t.Errorf("%s: h2spec %s failed: %s\n%s\n(fix it, or list it in %s with the reason)", name, c.id, c.desc, c.detail, h2specExceptions)
			}
		}
		for id := range excused {
			if !seen[id] {
				t.Errorf("%s: exception %s names no h2spec case that ran", name, id)
			}
		}
		t.Logf("%s: %d cases, %d passed, %d failed (%d listed exceptions), %d skipped", name,
			len(results[i])+skipped[i], len(results[i])-failed, failed, listed, skipped[i])
	}
}

// resetRace reports a case that failed only because the server's close
// reached h2spec as a TCP reset: the server sent its GOAWAY and closed
// the connection (an outcome the case accepts) with h2spec's frames still
// unread, so the kernel reset the connection and h2spec's read failed
// before it saw the GOAWAY. It depends on timing (seen once in CI, on a
// loaded machine, for http2/5.1/10).
func resetRace(c h2specCase) bool {
	return strings.Contains(c.detail, "connection reset by peer") && strings.Contains(c.detail, "Connection closed")
}

// timedOut reports a case that failed only because h2spec waited for a
// frame longer than its timeout (5 s): seen once in CI, for
// http2/6.9.2/1 on a TLS frontend while other packages' tests loaded
// the machine, and not in 48 full runs on a machine kept busy by two
// spinning processes. A conformance defect fails again when run alone;
// a stall of the loaded machine passes.
func timedOut(c h2specCase) bool {
	return strings.HasSuffix(strings.TrimSpace(c.detail), "Timeout")
}

// rerunPasses runs one case again, up to twice, and reports whether it
// passed.
func rerunPasses(t *testing.T, bin, addr string, flags []string, id string) bool {
	for range 2 {
		cases, _, err := runH2spec(t, bin, addr, append(slices.Clone(flags), id))
		if err == nil && len(cases) == 1 && !cases[0].failed {
			t.Logf("h2spec %s passed when run again alone (its first failure was a connection reset race or a timeout)", id)
			return true
		}
	}
	return false
}

// runH2spec runs h2spec against addr with extra flags and returns its
// cases. h2spec exits non-zero when a case fails; its report says which.
func runH2spec(t *testing.T, bin, addr string, flags []string) ([]h2specCase, int, error) {
	host, port, ok := strings.Cut(addr, ":")
	if !ok {
		return nil, 0, fmt.Errorf("frontend address %q", addr)
	}
	report := filepath.Join(t.TempDir(), "h2spec.xml")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := slices.Concat([]string{"-h", host, "-p", port, "-o", "5", "-S", "-j", report}, flags)
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if ctx.Err() != nil {
		return nil, 0, fmt.Errorf("h2spec %s: %w\n%s", strings.Join(args, " "), ctx.Err(), out)
	}
	b, rerr := os.ReadFile(report)
	if rerr != nil {
		return nil, 0, fmt.Errorf("h2spec %s: %v, no report: %w\n%s", strings.Join(args, " "), err, rerr, out)
	}
	cases, skipped, err := parseH2specReport(b)
	if err == nil && len(cases) == 0 {
		err = fmt.Errorf("h2spec %s ran no case\n%s", strings.Join(args, " "), out)
	}
	return cases, skipped, err
}

// The report parser numbers cases per section from 1, as h2spec prints
// them, and tells failures (h2spec writes them as <error>) and skips.
func TestParseH2specReport(t *testing.T) {
	const report = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="3.5. HTTP/2 Connection Preface" package="http2/3.5" id="3.5" tests="2" skipped="0" failures="0" errors="1">
    <testcase package="http2/3.5" classname="Sends client connection preface" time="0.0001"></testcase>
    <testcase package="http2/3.5" classname="Sends invalid connection preface" time="0.0010">
      <error>Connection closed</error>
    </testcase>
  </testsuite>
  <testsuite name="6.9.2. Initial Flow-Control Window Size" package="http2/6.9.2" id="6.9.2" tests="2" skipped="1" failures="1" errors="0">
    <testcase package="http2/6.9.2" classname="a" time="0.0005"><failure>f</failure></testcase>
    <testcase package="http2/6.9.2" classname="b" time="0.0002"><skipped></skipped></testcase>
  </testsuite>
</testsuites>`
	cases, skipped, err := parseH2specReport([]byte(report))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cases {
		got = append(got, fmt.Sprintf("%s %v", c.id, c.failed))
	}
	want := []string{"http2/3.5/1 false", "http2/3.5/2 true", "http2/6.9.2/1 true"}
	if !slices.Equal(got, want) || skipped != 1 {
		t.Errorf("cases %q, %d skipped; want %q, 1 skipped", got, skipped, want)
	}
	if _, _, err := parseH2specReport([]byte("<testsuites><testsuite>")); err == nil {
		t.Error("a truncated report parsed")
	}
}

// The checked-in exception list parses, and every exception has a reason
// that cites the RFC.
func TestH2specExceptionsFile(t *testing.T) {
	ex, err := readH2specExceptions(h2specExceptions)
	if err != nil {
		t.Fatal(err)
	}
	for fe, m := range ex {
		for id, reason := range m {
			if !strings.Contains(reason, "RFC 9113 §") {
				t.Errorf("%s %s: reason %q cites no RFC 9113 section", fe, id, reason)
			}
		}
	}
}
