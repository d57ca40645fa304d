package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spillwaylb/spillway/internal/fleet"
)

const configHelp = `
Usage: spillway config <push|get|history|rollback> [flags]

Manage the config a fleet of instances shares through etcd (spillway serve
--fleet; docs/fleet.md). Every push is a new revision with its author, time,
message and SHA-256; the last 50 are kept. Each instance watches the current
revision and applies it with the usual reload rules: a revision that fails on
an instance (a certificate file missing on that host, a port in use) is
reported, and that instance keeps serving its last good config.

  spillway config push FILE [--author A] [--message M]
      validate FILE (as spillway validate does) and make it the fleet's
      config; an invalid file is refused and changes nothing
  spillway config get [--revision N] [--instances]
      print the current config (or revision N) to stdout, its revision,
      author and time to stderr; --instances lists instead the instances
      alive and the revision each runs (or rejected, and why)
  spillway config history
      list the revisions kept, newest first
  spillway config rollback REVISION [--author A] [--message M]
      push revision REVISION's config again, as a new revision

etcd is named by --fleet (or $SPILLWAY_FLEET), with the same TLS and user
flags as spillway serve.

Examples:
  export SPILLWAY_FLEET=etcd://10.0.0.5:2379,10.0.0.6:2379,10.0.0.7:2379
  spillway config push spillway.yaml --message "shift 10% to us-west1"
  spillway config get --instances
  spillway config history
  spillway config rollback 41
`

// configCmd is one run of spillway config SUBCOMMAND: its flags and
// positional arguments.
type configCmd struct {
	sub             string
	pos             []string
	ff              *fleetFlags
	timeout         time.Duration
	author, message string
	revision        int64
	instances       bool
}

func runConfig(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, strings.TrimLeft(configHelp, "\n"))
		if len(args) == 0 {
			return errUsage
		}
		return flag.ErrHelp
	}
	c, err := parseConfigFlags(args[0], args[1:], stderr)
	if err != nil {
		return err
	}
	st, closeStore, err := c.ff.store()
	if err != nil {
		return err
	}
	defer closeStore()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	switch c.sub {
	case "push":
		return c.push(ctx, st, stdout)
	case "rollback":
		return c.rollback(ctx, st, stdout)
	case "history":
		return c.history(ctx, st, stdout)
	default: // get
		return c.get(ctx, st, stdout, stderr)
	}
}

// parseConfigFlags defines and parses the flags of subcommand sub.
func parseConfigFlags(sub string, rest []string, stderr io.Writer) (*configCmd, error) {
	c := &configCmd{sub: sub}
	fs := newFlags("config "+sub, configHelp, stderr)
	c.ff = addFleetFlags(fs, "etcd endpoints of the fleet: etcd://host:2379,host:2379 (default $"+fleetEnv+")")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "how long to wait for etcd")
	var want int // positional arguments
	switch sub {
	case "push", "rollback":
		fs.StringVar(&c.author, "author", os.Getenv("USER"), "author `NAME` recorded with the revision (default $USER)")
		fs.StringVar(&c.message, "message", "", "`TEXT` recorded with the revision: why")
		want = 1
	case "get":
		fs.Int64Var(&c.revision, "revision", 0, "print revision `N` from the history instead of the current one")
		fs.BoolVar(&c.instances, "instances", false, "list the instances alive and the revision each runs")
	case "history":
	default:
		fmt.Fprintf(stderr, "spillway config: unknown subcommand %q (want push, get, history or rollback)\n", sub)
		return nil, errUsage
	}
	pos, err := parseWithArgs(fs, rest, want)
	if err != nil {
		return nil, err
	}
	c.pos = pos
	return c, nil
}

// wrap explains a timeout: etcd did not answer within --timeout.
func (c *configCmd) wrap(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w (no answer from etcd at %s within --timeout %s; fix: check --fleet and that etcd is up)", err, *c.ff.endpoints, c.timeout)
	}
	return err
}

// push runs config push FILE.
func (c *configCmd) push(ctx context.Context, st *fleet.Store, stdout io.Writer) error {
	data, err := os.ReadFile(c.pos[0])
	if err != nil {
		return fmt.Errorf("config push: %w", err)
	}
	r, err := st.Push(ctx, data, fleet.PushMeta{Author: c.author, Message: c.message, Source: c.pos[0]})
	if err != nil {
		return c.wrap(err)
	}
	fmt.Fprintf(stdout, "pushed %s as revision %d (sha256 %s, author %s)\n", c.pos[0], r.Revision, r.SHA256[:12], r.Author)
	return nil
}

// rollback runs config rollback REVISION.
func (c *configCmd) rollback(ctx context.Context, st *fleet.Store, stdout io.Writer) error {
	rev, err := strconv.ParseInt(c.pos[0], 10, 64)
	if err != nil || rev < 1 {
		return fmt.Errorf("config rollback %q: want a revision number (fix: spillway config history lists them)", c.pos[0])
	}
	r, err := st.Rollback(ctx, rev, fleet.PushMeta{Author: c.author, Message: c.message})
	if err != nil {
		return c.wrap(err)
	}
	fmt.Fprintf(stdout, "revision %d's config is now revision %d (author %s)\n", rev, r.Revision, r.Author)
	return nil
}

// history runs config history.
func (c *configCmd) history(ctx context.Context, st *fleet.Store, stdout io.Writer) error {
	h, err := st.History(ctx)
	if err != nil {
		return c.wrap(err)
	}
	if len(h) == 0 {
		return c.wrap(fleet.ErrNoConfig)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tTIME\tAUTHOR\tSHA256\tSOURCE\tMESSAGE")
	for _, r := range h {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.Revision, r.Time.Format(time.RFC3339), r.Author, r.SHA256[:12], r.Source, r.Message)
	}
	tw.Flush()
	return nil
}

// get runs config get: the current revision's config, --revision N's, or
// --instances.
func (c *configCmd) get(ctx context.Context, st *fleet.Store, stdout, stderr io.Writer) error {
	if c.instances {
		return c.wrap(printInstances(ctx, st, stdout))
	}
	var r *fleet.Record
	var err error
	if c.revision > 0 {
		r, err = st.Get(ctx, c.revision)
	} else {
		r, _, err = st.Current(ctx)
	}
	if err != nil {
		return c.wrap(err)
	}
	fmt.Fprintf(stderr, "# revision %d by %s at %s, sha256 %s\n", r.Revision, r.Author, r.Time.Format(time.RFC3339), r.SHA256[:12])
	_, err = io.WriteString(stdout, r.Config)
	return err
}

// printInstances lists the instances alive and their config status.
func printInstances(ctx context.Context, st *fleet.Store, w io.Writer) error {
	cur, _, err := st.Current(ctx)
	if err != nil && !errors.Is(err, fleet.ErrNoConfig) {
		return err
	}
	rs, err := st.Instances(ctx)
	if err != nil {
		return err
	}
	if cur != nil {
		fmt.Fprintf(w, "current revision %d\n", cur.Revision)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tREGION\tREVISION\tSTATUS\tERROR")
	for _, r := range rs {
		rev := strconv.FormatInt(r.Revision, 10)
		if r.Revision == 0 {
			rev = "0 (--config file)"
		}
		status := r.Status
		if r.RejectedRevision != 0 {
			status = fmt.Sprintf("rejected %d", r.RejectedRevision)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Instance, r.Region, rev, status, firstLine(r.Error))
	}
	return tw.Flush()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// parseWithArgs parses flags that may come before or after the want
// positional arguments, and returns those.
func parseWithArgs(fs *flag.FlagSet, args []string, want int) ([]string, error) {
	var pos []string
	for range len(args) + 1 {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != want {
		fmt.Fprintf(fs.Output(), "spillway %s: want %d argument(s), got %d %q (see --help)\n", fs.Name(), want, len(pos), pos)
		return nil, errUsage
	}
	return pos, nil
}
