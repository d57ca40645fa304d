package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

const ctlHelp = `
Usage: spillway ctl <drain|undrain|set|list|clear> [flags]

Change what a running spillway serve sends where, without editing its config:
take an endpoint, a group or a whole backend service out of service, lower a
group's capacityScaler, or change a service's weight in the URL maps' weighted
splits (HAProxy's "set server state drain", Envoy's drain). Each change is an
entry of the instance's runtime overlay, applied on top of the config as if
the file said it, so the engine (and spillway simulate, given the same
change in a file) treats it exactly as a config change, and every reload
applies it again:

  drain      a backend service: capacityScaler 0 on every backend of it;
             a group (--group, with --service or for every service using it):
             capacityScaler 0 on that backend;
             an endpoint (--endpoint IP, IP:PORT or an instance's name,
             optionally --group): taken out of its group. Requests in flight
             finish; no new request reaches it; it is not probed until undrained.
  undrain    remove the drain of the same target
  set        --capacity-scaler X (0, or 0.1-1) for a service's or group's
             backends, or --weight W (0-1000) for a service's
             weightedBackendServices entries
  list       print the entries in force, and problems: entries whose target
             the config in force lacks (kept, changing nothing) or that it
             could not take
  clear      remove an entry by its ID (as list prints it), or --all

--for 30m makes an entry end by itself. A change the config cannot take (a
drain of a service's only backend) is refused and changes nothing. Every
change, refused ones too, is logged with who (--actor, default USER@HOST),
from where and when: on the process log, and as a JSON line in serve's
--audit-log FILE. In fleet mode the overlay lives in etcd: a change made on
one instance applies on all, and survives restarts.

The admin API's token (mutating requests always need it when the server has
one) comes from --admin-token-file FILE or SPILLWAY_ADMIN_TOKEN.

Examples:
  spillway ctl drain --endpoint 10.0.1.7 --group neg-us-east1-b --for 30m --reason "kernel upgrade"
  spillway ctl drain --service bs-web --group ig-us-west1-a
  spillway ctl set --service bs-web --group ig-us-west1-a --capacity-scaler 0.5
  spillway ctl set --service bs-canary --weight 0
  spillway ctl list
  spillway ctl undrain --endpoint 10.0.1.7 --group neg-us-east1-b
  spillway ctl clear "CAPACITY_SCALER service=bs-web group=ig-us-west1-a"
`

// ctlCmd is one run of spillway ctl.
type ctlCmd struct {
	sub                      string
	admin, tokenFile, actor  string
	service, group, endpoint string
	scaler                   float64
	weight                   int
	forDur                   time.Duration
	reason                   string
	all, asJSON              bool
	set                      map[string]bool
	pos                      []string
}

func runCtl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, strings.TrimLeft(ctlHelp, "\n"))
		if len(args) == 0 {
			return errUsage
		}
		return flag.ErrHelp
	}
	c, err := parseCtlFlags(args[0], args[1:], stderr)
	if err != nil {
		return err
	}
	token, err := adminToken(c.tokenFile)
	if err != nil {
		return err
	}
	if c.sub == "list" {
		return c.show(ctx, token, http.MethodGet, nil, stdout)
	}
	req, err := c.request()
	if err != nil {
		return err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	return c.show(ctx, token, http.MethodPost, body, stdout)
}

// parseCtlFlags parses the flags of spillway ctl SUB.
func parseCtlFlags(sub string, args []string, stderr io.Writer) (*ctlCmd, error) {
	switch sub {
	case "drain", "undrain", "set", "list", "clear":
	default:
		fmt.Fprintf(stderr, "spillway ctl: unknown subcommand %q; want drain, undrain, set, list or clear (spillway ctl --help)\n", sub)
		return nil, errUsage
	}
	c := &ctlCmd{sub: sub}
	fs := newFlags("ctl "+sub, ctlHelp, stderr)
	fs.StringVar(&c.admin, "admin", "127.0.0.1:9901", "admin `ADDR` of the running spillway serve")
	fs.StringVar(&c.tokenFile, "admin-token-file", "", "`FILE` holding the admin API bearer token (default: the SPILLWAY_ADMIN_TOKEN environment variable)")
	fs.StringVar(&c.actor, "actor", defaultActor(), "who makes the change, for the audit log")
	fs.StringVar(&c.service, "service", "", "the backend service `NAME`")
	fs.StringVar(&c.group, "group", "", "the instance group or network endpoint group `NAME`")
	fs.StringVar(&c.endpoint, "endpoint", "", "the endpoint: `IP`, IP:PORT or an instance's name")
	fs.Float64Var(&c.scaler, "capacity-scaler", 0, "set: the capacityScaler `X`, 0 or 0.1-1")
	fs.IntVar(&c.weight, "weight", 0, "set: the service's weight `W` in weightedBackendServices, 0-1000")
	fs.DurationVar(&c.forDur, "for", 0, "the entry ends by itself after `DURATION` (e.g. 30m; default: until cleared)")
	fs.StringVar(&c.reason, "reason", "", "why, for the audit log and list")
	fs.BoolVar(&c.all, "all", false, "clear: every entry")
	fs.BoolVar(&c.asJSON, "json", false, "print the overlay as JSON")
	want := 0
	if sub == "clear" && !slices.Contains(args, "--all") && !slices.Contains(args, "-all") {
		want = 1
	}
	pos, err := parseWithArgs(fs, args, want)
	if err != nil {
		return nil, err
	}
	c.set, c.pos = givenFlags(fs), pos
	return c, nil
}

// defaultActor is USER@HOST.
func defaultActor() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && name == "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

// request turns the flags into the admin API's overlay request.
func (c *ctlCmd) request() (*serve.OverlayRequest, error) {
	r := &serve.OverlayRequest{Op: c.sub, Actor: c.actor, Reason: c.reason, All: c.all}
	r.Service, r.Group, r.Endpoint = c.service, c.group, c.endpoint
	if c.forDur > 0 {
		r.For = c.forDur.String()
	}
	switch c.sub {
	case "clear":
		if len(c.pos) == 1 {
			r.ID = c.pos[0]
		}
		if (r.ID == "") == !c.all {
			return nil, fmt.Errorf("ctl clear: give one entry ID (as spillway ctl list prints it) or --all")
		}
		return r, nil
	case "set":
		if c.set["capacity-scaler"] == c.set["weight"] {
			return nil, fmt.Errorf("ctl set: give one of --capacity-scaler X or --weight W")
		}
		if c.set["capacity-scaler"] {
			r.CapacityScaler = &c.scaler
		} else {
			r.Weight = &c.weight
		}
	}
	if c.service == "" && c.group == "" && c.endpoint == "" {
		return nil, fmt.Errorf("ctl %s: name what to change with --service, --group or --endpoint", c.sub)
	}
	return r, nil
}

// show sends the request to /overlay and prints the overlay it answers.
func (c *ctlCmd) show(ctx context.Context, token, method string, body []byte, stdout io.Writer) error {
	b, err := callAdmin(ctx, c.admin, token, method, "/overlay", body)
	if err != nil {
		return err
	}
	if c.asJSON {
		_, err = stdout.Write(b)
		return err
	}
	var ov report.Overlay
	if err := json.Unmarshal(b, &ov); err != nil {
		return fmt.Errorf("the admin API answered something that is not an overlay: %w", err)
	}
	printOverlay(stdout, &ov)
	return nil
}

// printOverlay prints the overlay's entries as a table, then its
// problems.
func printOverlay(w io.Writer, ov *report.Overlay) {
	if len(ov.Entries) == 0 {
		fmt.Fprintln(w, "no runtime overlay: the config is served as loaded")
	} else {
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tACTOR\tSET\tEXPIRES\tREASON")
		for _, e := range ov.Entries {
			exp := "never"
			if !e.Expires.IsZero() {
				exp = e.Expires.UTC().Format(time.RFC3339)
			}
			id := e.ID
			if e.Action != "DRAIN" {
				id = fmt.Sprintf("%s (%g)", e.ID, e.Value)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", id, e.Actor, e.Set.UTC().Format(time.RFC3339), exp, e.Reason)
		}
		tw.Flush()
	}
	for _, p := range ov.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
}
