package cli

import (
	"regexp"
	"strings"
	"testing"
)

// TestUnknownCommand: a mistyped command gets the nearest one, and not
// the whole usage; a flag before any command is explained.
func TestUnknownCommand(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"serv"}, `spillway: unknown command "serv"; did you mean "serve"?`},
		{[]string{"valdiate", "--config", "x.yaml"}, `spillway: unknown command "valdiate"; did you mean "validate"?`},
		{[]string{"get-helth"}, `spillway: unknown command "get-helth"; did you mean "get-health"?`},
		{[]string{"frobnicate"}, `spillway: unknown command "frobnicate"; the commands are lab, serve, simulate, validate, import, dns, dnssec, config, get-health, ctl, cache, version`},
		{[]string{"--confg", "x.yaml"}, `spillway: "--confg" is a flag; flags come after the command, e.g. spillway serve --config FILE`},
	} {
		code, out, errOut := runMain(t, tt.args...)
		if code != 2 || !strings.HasPrefix(errOut, tt.want) || strings.Count(errOut, "\n") != 1 || out != "" {
			t.Errorf("spillway %q: exit %d, stderr:\n%s\nwant exit 2 and %q without the usage", tt.args, code, errOut, tt.want)
		}
	}
}

// TestUnknownFlag: a mistyped flag gets the nearest flag of the command,
// in one line, instead of Go's message and the whole help; so do the
// other flag errors.
func TestUnknownFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--confg", "x.yaml"}, "spillway serve: unknown flag --confg; did you mean --config? (spillway serve --help lists the flags)"},
		{[]string{"validate", "-confg", "x.yaml"}, "spillway validate: unknown flag -confg; did you mean --config? (spillway validate --help lists the flags)"},
		{[]string{"simulate", "--config", "x.yaml", "--dwon", "us-east1-b"}, "spillway simulate: unknown flag --dwon; did you mean --down? (spillway simulate --help lists the flags)"},
		{[]string{"config", "get", "--fleeet", "etcd://127.0.0.1:1"}, "spillway config get: unknown flag --fleeet; did you mean --fleet? (spillway config get --help lists the flags)"},
		{[]string{"import", "--otu", "x.yaml"}, "spillway import: unknown flag --otu; did you mean --out? (spillway import --help lists the flags)"},
		{[]string{"serve", "--zzzzzz"}, "spillway serve: unknown flag --zzzzzz (spillway serve --help lists the flags)"},
		{[]string{"serve", "--config"}, "spillway serve: --config needs a value: --config FILE"},
		{[]string{"serve", "--watch", "soon"}, `spillway serve: --watch "soon": parse error (want a duration such as 1s)`},
		{[]string{"serve", "--pprof=maybe"}, `spillway serve: --pprof "maybe": parse error (want true or false)`},
	} {
		code, out, errOut := runMain(t, tt.args...)
		if code != 2 || errOut != tt.want+"\n" || out != "" {
			t.Errorf("spillway %q: exit %d, stderr:\n%s\nwant exit 2 and only\n%s", tt.args, code, errOut, tt.want)
		}
	}
}

// TestHelpDefaultsOnce: no flag's help says its default twice (serve's
// --instance read "(default the host name) (default "vm")").
func TestHelpDefaultsOnce(t *testing.T) {
	twice := regexp.MustCompile(`\(default.*\(default`)
	for _, cmd := range [][]string{{"serve"}, {"lab"}, {"simulate"}, {"validate"}, {"import"}, {"dnssec", "keygen"}, {"config", "push"}, {"get-health"}, {"version"}} {
		code, _, errOut := runMain(t, append(cmd, "--help-all")...)
		if code != 0 || !strings.Contains(errOut, "--") {
			t.Errorf("%v --help-all: exit %d:\n%s", cmd, code, errOut)
		}
		for line := range strings.Lines(errOut) {
			if twice.MatchString(line) {
				t.Errorf("%v --help-all: a default twice: %s", cmd, line)
			}
		}
	}
}

// TestServeHelpShort: serve --help teaches in a screenful (usage, what it
// does, examples, the common flags) and points to --help-all, which has
// every flag and topic.
func TestServeHelpShort(t *testing.T) {
	code, _, short := runMain(t, "serve", "--help")
	if n := strings.Count(short, "\n"); code != 0 || n > 60 || n < 15 {
		t.Errorf("serve --help: exit %d, %d lines, want 0 and 15..60:\n%s", code, n, short)
	}
	for _, want := range []string{"Usage: spillway serve --config FILE", "--config FILE", "--admin ADDR", "Examples:", "spillway serve --help-all"} {
		if !strings.Contains(short, want) {
			t.Errorf("serve --help lacks %q:\n%s", want, short)
		}
	}
	code, _, all := runMain(t, "serve", "--help-all")
	if code != 0 {
		t.Fatalf("serve --help-all: exit %d", code)
	}
	for _, want := range []string{"Hot reload:", "The admin listener", "Connections:", "CPUs:", "Cloud CDN:", "POST /cache/invalidate", "Anycast (BGP):", "spillway get-health --admin", "Fleet mode:", "Embedded etcd:", "--fleet-rate-limits=false", "--fleet-embedded-state STATE", "--max-connections", "--procs"} {
		if !strings.Contains(all, want) {
			t.Errorf("serve --help-all lacks %q", want)
		}
	}
	if strings.Contains(all, "--help-all") && strings.Count(all, "\n  --help-all") > 0 {
		t.Errorf("serve --help-all lists --help-all as a flag")
	}
}
