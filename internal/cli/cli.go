// Package cli implements the spillway command line: subcommand dispatch,
// flags and the --help texts.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spillwaylb/spillway/internal/config"
)

const usage = `spillway: a self-hostable global load balancer with Google Cloud's traffic model.

Usage:
  spillway <command> [flags]

Commands:
  lab        start a real local lab (six zones of backends on loopback, the proxy,
             the seed's failure scenarios) and print the results table
  serve      run the proxy: HTTP/1.1 + HTTP/2 frontends, health checks, hot reload
  simulate   predict how a config splits traffic under failures, on a virtual clock
  validate   check a config and run its URL map tests[]
  import     write a config from gcloud exports and lists, or terraform show -json
  dnssec     make a zone's DNSSEC key (keygen); print its DS for the parent (ds)
  config     a fleet's shared config in etcd: push, get, history, rollback
  get-health print a running instance's health view (like gcloud get-health)
  version    print the version, commit and Go toolchain of this build

Configs use Google Cloud's REST field names (weightedBackendServices,
preference, maxRatePerInstance, autoCapacityDrain, ...), so exported resources
load as they are. Run 'spillway <command> --help' for a command's flags and
examples; docs/ in the repository explains the model.
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
		fmt.Fprintf(stderr, "spillway: unknown command %q\n\n%s", cmd, usage)
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

// newFlags returns a FlagSet whose --help prints text (the command's
// teaching help) followed by the flag defaults.
// givenFlags returns the names of the flags given on the command line.
func givenFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

func newFlags(name, text string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(out, strings.TrimLeft(text, "\n"))
		fmt.Fprintln(out, "\nFlags:")
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags and rejects positional arguments.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "spillway %s: unexpected argument %q (flags start with --)\n", fs.Name(), fs.Arg(0))
		return errUsage
	}
	return nil
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
