// Package cli implements the spillway command line: subcommand dispatch,
// flags and the --help texts.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

const usage = `spillway: a self-hostable global load balancer with Google Cloud's traffic model.

Usage:
  spillway <command> [flags]

Commands:
  lab        start a real local lab (six zones of backends on loopback, the proxy,
             the seed's failure scenarios) and print the results table;
             --fleet through three instances on etcd, --global (root) three
             sites in network namespaces with BGP anycast and two layers
  serve      run the load balancer: HTTP/1.1, HTTP/2 and HTTP/3 frontends,
             security policies, Cloud CDN, DNS GSLB, BGP anycast, health
             checks, hot reload
  simulate   predict how a config splits traffic under failures, on a virtual clock
  validate   check a config and run its URL map tests[]
  import     write a config from gcloud exports and lists, or terraform show -json
  dns        write a DNS zone as an RFC 1035 master file (export)
  dnssec     make a zone's DNSSEC key (keygen); print its DS for the parent (ds)
  config     a fleet's shared config in etcd: push, get, history, rollback
  get-health print a running instance's health view (like gcloud get-health)
  ctl        drain, undrain or reweight an endpoint, group or service of a
             running instance (or fleet), with expiry and an audit log
  cache      invalidate Cloud CDN's cache of a running instance (a path or /prefix/*)
  version    print the version, commit and Go toolchain of this build

Configs use Google Cloud's REST field names (weightedBackendServices,
preference, maxRatePerInstance, autoCapacityDrain, ...), so exported resources
load as they are. Run 'spillway <command> --help' for a command's flags and
examples, --help-all for every flag and topic; docs/ in the repository
explains the model.
`

// Main runs the command line and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "simulate", "sim":
		err = runSimulate(ctx, rest, stdout, stderr)
	case "version", "--version":
		err = runVersion(ctx, rest, stdout, stderr)
	case "help", "-h", "--help":
		if len(rest) > 0 {
			return Main(ctx, []string{rest[0], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
	default:
		if run, ok := extraCommands(cmd); ok {
			err = run(ctx, rest, stdout, stderr)
			break
		}
		fmt.Fprintln(stderr, unknownCommand(cmd))
		return 2
	}
	var ec exitCode
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ec):
		return int(ec)
	case errors.Is(err, errUsage):
		return 2
	}
	// A config's errors come with their source lines (config.Explain).
	fmt.Fprintf(stderr, "spillway %s: %s\n", cmd, strings.TrimRight(config.Explain(err), "\n"))
	return 1
}

// exitCode is an error that only carries an exit status (the command has
// already reported why).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

var errUsage = errors.New("usage")

// givenFlags returns the names of the flags given on the command line.
func givenFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// commandNames are the commands, as the usage lists them.
var commandNames = []string{"lab", "serve", "simulate", "validate", "import", "dns", "dnssec", "config", "get-health", "ctl", "cache", "version"}

// unknownCommand says that cmd is not a command, with the nearest one.
func unknownCommand(cmd string) string {
	if strings.HasPrefix(cmd, "-") {
		return fmt.Sprintf("spillway: %q is a flag; flags come after the command, e.g. spillway serve --config FILE (spillway help lists the commands)", cmd)
	}
	if c := config.Closest(cmd, append(commandNames, "sim", "help")); c != "" {
		return fmt.Sprintf("spillway: unknown command %q; did you mean %q? (spillway help lists the commands)", cmd, c)
	}
	return fmt.Sprintf("spillway: unknown command %q; the commands are %s (spillway help explains them)", cmd, strings.Join(commandNames, ", "))
}

// help is a command's --help: its text, then its flags, or only the
// common ones when more is set; --help-all then prints more (the topics)
// and every flag.
type help struct {
	text, more string
	common     []string
}

// helpAll is the --help-all flag: a bool that parseFlags answers.
type helpAll struct {
	set   bool
	print func()
}

func (h *helpAll) String() string   { return strconv.FormatBool(h.set) }
func (h *helpAll) IsBoolFlag() bool { return true }
func (h *helpAll) Set(v string) error {
	b, err := strconv.ParseBool(v)
	h.set = b
	return err
}

// newFlags returns a FlagSet whose --help prints text (the command's
// teaching help) followed by the flags.
func newFlags(name, text string, out io.Writer) *flag.FlagSet {
	return newFlagsHelp(name, help{text: text}, out)
}

// newFlagsHelp returns a FlagSet whose --help prints h.text and the flags
// (the common ones only when h.more is set) and whose --help-all prints
// h.text, h.more and every flag.
func newFlagsHelp(name string, h help, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	all := func() {
		fmt.Fprint(out, strings.TrimLeft(h.text, "\n"))
		fmt.Fprint(out, h.more)
		fmt.Fprintln(out, "\nFlags:")
		printFlags(out, fs, nil)
	}
	fs.Usage = all
	if h.more != "" {
		fs.Usage = func() {
			fmt.Fprint(out, strings.TrimLeft(h.text, "\n"))
			fmt.Fprintln(out, "\nCommon flags:")
			printFlags(out, fs, h.common)
			fmt.Fprintf(out, "\nEvery flag and topic: spillway %s --help-all\n", name)
		}
	}
	fs.Var(&helpAll{print: all}, "help-all", "print the whole help: every flag and topic")
	return fs
}

// printFlags prints fs's flags (only those named, unless only is nil):
// "--name ARG" and its help, with the default unless the help already
// tells it.
func printFlags(w io.Writer, fs *flag.FlagSet, only []string) {
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "help-all" || only != nil && !slices.Contains(only, f.Name) {
			return
		}
		arg, text := flag.UnquoteUsage(f)
		if arg != "" {
			arg = " " + arg
		}
		switch f.DefValue {
		case "", "0", "false", "0s", "[]":
		default:
			if !strings.Contains(text, "(default") {
				text += fmt.Sprintf(" (default %s)", f.DefValue)
			}
		}
		fmt.Fprintf(w, "  --%s%s\n        %s\n", f.Name, arg, text)
	})
}

// parse parses flags and rejects positional arguments.
func parse(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "spillway %s: unexpected argument %q (flags start with --)\n", fs.Name(), fs.Arg(0))
		return errUsage
	}
	return nil
}

// parseFlags runs fs.Parse without the flag package's own messages: -h
// and --help print the command's help, --help-all the whole help
// (flag.ErrHelp), and a mistake is one line naming it, with the nearest
// flag for an unknown one (errUsage).
func parseFlags(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
		return err
	case err != nil:
		fmt.Fprintf(out, "spillway %s: %s\n", fs.Name(), flagError(fs, err, args))
		return errUsage
	}
	if h, ok := fs.Lookup("help-all").Value.(*helpAll); ok && h.set {
		h.print()
		return flag.ErrHelp
	}
	return nil
}

// flagError rewords an error of the flag package for fs, naming a flag
// as args wrote it (-x or --x).
func flagError(fs *flag.FlagSet, err error, args []string) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		for _, a := range args {
			if typed, _, _ := strings.Cut(a, "="); strings.TrimLeft(typed, "-") == strings.TrimLeft(name, "-") {
				name = typed
				break
			}
		}
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		hint := fmt.Sprintf("(spillway %s --help lists the flags)", fs.Name())
		if c := config.Closest(strings.TrimLeft(name, "-"), names); c != "" {
			return fmt.Sprintf("unknown flag %s; did you mean --%s? %s", name, c, hint)
		}
		return fmt.Sprintf("unknown flag %s %s", name, hint)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		arg := "VALUE"
		if f := fs.Lookup(name); f != nil {
			if a, _ := flag.UnquoteUsage(f); a != "" {
				arg = a
			}
		}
		return fmt.Sprintf("--%s needs a value: --%s %s", name, name, arg)
	}
	if m := invalidValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("--%s %q: %s%s", m[2], m[1], m[3], valueHint(fs.Lookup(m[2])))
	}
	return msg
}

// invalidValue matches the flag package's `invalid value "soon" for flag
// -watch: parse error` and `invalid boolean value "x" for -pprof: …`.
var invalidValue = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-([^:]+): (.*)$`)

// valueHint says what a flag takes, for an invalid value.
func valueHint(f *flag.Flag) string {
	if f == nil {
		return ""
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return " (want true or false)"
	}
	if _, err := time.ParseDuration(f.DefValue); err == nil && f.DefValue != "0" {
		return " (want a duration such as 1s)"
	}
	return ""
}

// listFlag is a comma-separated, repeatable list flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}
