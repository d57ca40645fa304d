package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spillwaylb/spillway/internal/cdn"
	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/serve"
)

const cacheHelp = `
Usage: spillway cache invalidate --path PATH [--host HOST] [flags]

Remove objects from Cloud CDN's cache of a running spillway serve, as
gcloud compute url-maps invalidate-cdn-cache does: --path is a path
(/images/logo.png) or a prefix ending in /* (/images/*); --host limits
it to one host. Objects filled after the invalidation are fetched from
the origin again. In fleet mode the instance asked writes the
invalidation to etcd and every other instance applies it too
(docs/fleet.md). The admin API's token comes from --admin-token-file
FILE or SPILLWAY_ADMIN_TOKEN. It prints what it removed:

  invalidated /images/*: 12 objects removed

Examples:
  spillway cache invalidate --path '/images/*'
  spillway cache invalidate --path /index.html --host www.example.com
  spillway cache invalidate --admin 127.0.0.1:9901 \
      --admin-token-file /etc/spillway/admin-token --path '/static/*'
`

func runCache(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 0:
		fmt.Fprint(stderr, strings.TrimLeft(cacheHelp, "\n"))
		return errUsage
	case args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help":
		args = []string{"invalidate", "--help"} // the help with the flags
	case args[0] != "invalidate":
		want := "want invalidate"
		if config.Closest(args[0], []string{"invalidate"}) != "" {
			want = `did you mean "invalidate"?`
		}
		fmt.Fprintf(stderr, "spillway cache: unknown subcommand %q; %s (spillway cache --help)\n", args[0], want)
		return errUsage
	}
	fs := newFlags("cache invalidate", cacheHelp, stderr)
	admin := fs.String("admin", "127.0.0.1:9901", "admin `ADDR` of the running spillway serve")
	tokenFile := fs.String("admin-token-file", "", "`FILE` holding the admin API bearer token (default: the SPILLWAY_ADMIN_TOKEN environment variable)")
	path := fs.String("path", "", "the `PATH` to invalidate: exact, or a prefix ending in /*")
	host := fs.String("host", "", "only this `HOST`'s objects (default: every host)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *path == "" {
		fmt.Fprintln(stderr, "spillway cache invalidate: --path is required, e.g. --path '/images/*' or --path /index.html")
		return errUsage
	}
	if err := cdn.ValidatePathPattern(*path); err != nil {
		return fmt.Errorf("--path %q: %w", *path, err)
	}
	token, err := adminToken(*tokenFile)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(serve.InvalidateRequest{Path: *path, Host: *host})
	b, err := callAdmin(ctx, *admin, token, http.MethodPost, "/cache/invalidate", body)
	if err != nil {
		return err
	}
	var out serve.InvalidateResponse
	if err := json.Unmarshal(b, &out); err != nil {
		return err
	}
	fleet := ""
	if out.Fleet {
		fleet = " here; sent to every instance of the fleet"
	}
	objects := "objects"
	if out.Removed == 1 {
		objects = "object"
	}
	fmt.Fprintf(stdout, "invalidated %s%s: %d %s removed%s\n", out.Host, out.Path, out.Removed, objects, fleet)
	return nil
}
