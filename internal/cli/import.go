package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/gcpimport"
	"github.com/spillwaylb/spillway/internal/plan"
)

const importHelp = `
Usage: spillway import [--out FILE] [--frontend ADDRESS [--region REGION]]
                       [--endpoints GROUP[@ZONE]=FILE]... [--serverless REGION=URL]...
                       [--internet-neg-region REGION] FILE...

Turn what gcloud and terraform write about a global external Application Load
Balancer into a Spillway config. Each FILE is recognised by its content:

  gcloud compute url-maps export / describe            (URL maps)
  gcloud compute backend-services export / describe    (backend services)
  gcloud compute health-checks export / describe       (health checks)
  gcloud network-services service-lb-policies describe (service LB policies)
  gcloud compute network-endpoint-groups describe      (zonal, serverless and
                                                        internet NEGs)
  gcloud compute instance-groups describe / list --format=json
                                                       (named ports)
  gcloud compute instances list --format=json          (instance addresses)
  terraform show -json                                 (a whole state)

A file may hold one resource, several YAML documents separated by ---, or a
JSON or YAML list. Resources with kind: compute#... are recognised by it;
others by their fields (backends → backend service, pathMatchers → URL map,
httpHealthCheck → health check, ...).

Group members come from list commands that do not say which group they list,
so each is given with --endpoints GROUP[@ZONE]=FILE:

  gcloud compute network-endpoint-groups list-network-endpoints NEG --zone=Z --format=json
  gcloud compute instance-groups list-instances GROUP --zone=Z --format=json

The zone may be left out when a backend service's link to the group or the
group's describe output gives it. list-instances names instances without
addresses: give 'gcloud compute instances list --format=json' too (the first
network interface's networkIP is used; instances without one are reported).
Instance groups take namedPorts from describe output, else from the
namedPorts of list-instances, else from a backend service's portName and port
(reported).

What is carried: every field the config understands, links as they are
(references accept links). Dropped silently and counted in the output's
header: output-only fields (id, kind, selfLink, creationTimestamp,
fingerprint, region, usedBy, ...), terraform bookkeeping (project, timeouts,
labels copies) and disabled features (iap with enabled: false, logConfig with
enable: false, cdnPolicy while enableCDN is false). Reported on stderr (and
in the header), each with the reason: enabled Cloud CDN, a Cloud Armor
policy the input does not hold (give security-policies exports too), IAP,
logging, any other field or
resource Spillway does not support, groups without members, instances
without addresses.

Serverless NEGs (networkEndpointType SERVERLESS: cloudRun, appEngine,
cloudFunction) have no endpoints; where their services run outside Google
Cloud is spillway.serverless, one HTTPS base URL per region:
--serverless REGION=https://HOST[:PORT] gives it (repeatable); a region
without one gets a placeholder (https://REGION.serverless.invalid, which
never resolves), reported. INTERNET_FQDN_PORT NEGs are global in Google
Cloud and need a region in Spillway: --internet-neg-region, else --region;
their members come from list-network-endpoints NEG --global as --endpoints.

Frontends (where Spillway listens) have no gcloud export: --frontend writes
one for the first URL map (protocol HTTP; --region is where its clients
are); without it the output ends with a commented template.

The config goes to --out (or stdout). It is then validated as 'spillway
validate' would: exit status 0 when it is valid, 1 with the problems listed
on stderr when it is not (the file is still written, to be fixed by hand),
2 for bad usage or unreadable input. docs/import.md explains each choice.

Examples:
  gcloud compute url-maps export um-global-alb --destination url-map.yaml
  gcloud compute backend-services export bs-south-pref --global --destination bs-south.yaml
  gcloud compute instance-groups list-instances mig-us-south1-a --zone us-south1-a \
      --format=json > mig-us-south1-a.json
  gcloud compute instances list --format=json > instances.json
  spillway import --out spillway.yaml --frontend 127.0.0.1:8080 --region us-south1 \
      --endpoints mig-us-south1-a=mig-us-south1-a.json \
      url-map.yaml bs-south.yaml health-check.yaml instances.json

  terraform show -json > state.json
  spillway import --out spillway.yaml --frontend 127.0.0.1:8080 state.json

  # seed 003's Cloud Run NEGs, mapped to HTTPS services on loopback:
  spillway import --frontend 127.0.0.1:8082 --region asia-northeast2 \
      --serverless asia-northeast1=https://127.5.1.1:18443 \
      --serverless asia-northeast2=https://127.6.1.1:18443 \
      examples/winticket/gcloud/neg-tokyo.json examples/winticket/gcloud/neg-osaka.json \
      examples/winticket/gcloud/backend-services.yaml examples/winticket/gcloud/url-map.yaml

  # the fixtures in the repository:
  spillway import --frontend 127.0.0.1:8080 --region us-south1 \
      internal/gcpimport/testdata/terraform/state.json
`

// serverlessFlag collects --serverless REGION=URL.
type serverlessFlag []config.ServerlessTarget

func (f *serverlessFlag) String() string { return "" }

func (f *serverlessFlag) Set(v string) error {
	region, url, ok := strings.Cut(v, "=")
	if !ok || region == "" || url == "" {
		return errors.New("want REGION=URL, e.g. asia-northeast1=https://run.tokyo.internal:8443")
	}
	*f = append(*f, config.ServerlessTarget{Region: region, BaseURL: url})
	return nil
}

// endpointsFlag collects --endpoints GROUP[@ZONE]=FILE.
type endpointsFlag []gcpimport.Endpoints

func (e *endpointsFlag) String() string { return "" }

func (e *endpointsFlag) Set(v string) error {
	group, file, ok := strings.Cut(v, "=")
	if !ok || group == "" || file == "" {
		return errors.New("want GROUP[@ZONE]=FILE, e.g. neg-us-east1-b@us-east1-b=endpoints.json")
	}
	name, zone, _ := strings.Cut(group, "@")
	*e = append(*e, gcpimport.Endpoints{Group: name, Zone: zone, Source: gcpimport.Source{Name: file}})
	return nil
}

func runImport(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("import", importHelp, stderr)
	out := fs.String("out", "", "write the config to `FILE` (default stdout)")
	frontend := fs.String("frontend", "", "generate a frontend listening on `ADDRESS` (host:port) for the first URL map")
	region := fs.String("region", "", "the generated frontend's `REGION` (where its clients are)")
	var eps endpointsFlag
	fs.Var(&eps, "endpoints", "`GROUP[@ZONE]=FILE`: a list-network-endpoints or list-instances JSON for one group (repeatable)")
	var serverless serverlessFlag
	fs.Var(&serverless, "serverless", "`REGION=URL`: the HTTPS base URL of REGION's serverless services, spillway.serverless (repeatable)")
	internetRegion := fs.String("internet-neg-region", "", "the `REGION` of INTERNET_FQDN_PORT groups (default: --region)")
	// Flags may come after files: parse, take a file, parse the rest.
	var files []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) == 0 && len(eps) == 0 {
		fmt.Fprintln(stderr, "spillway import: give the files to import (spillway import --help lists what it reads)")
		return errUsage
	}
	if *region != "" && *frontend == "" {
		fmt.Fprintln(stderr, "spillway import: --region is the generated frontend's region: give --frontend too")
		return errUsage
	}
	opts := gcpimport.Options{Frontend: *frontend, Region: *region, InternetNEGRegion: *internetRegion, Serverless: serverless}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(stderr, "spillway import: %v\n", err)
			return errUsage
		}
		opts.Files = append(opts.Files, gcpimport.Source{Name: f, Data: data})
	}
	for _, e := range eps {
		data, err := os.ReadFile(e.Name)
		if err != nil {
			fmt.Fprintf(stderr, "spillway import: --endpoints %s: %v\n", e.Group, err)
			return errUsage
		}
		e.Data = data
		opts.Endpoints = append(opts.Endpoints, e)
	}
	res, err := gcpimport.Import(opts)
	if err != nil {
		fmt.Fprintf(stderr, "spillway import: %v\n", err)
		return errUsage
	}
	for _, n := range res.Notes {
		fmt.Fprintf(stderr, "not carried: %s\n", n)
	}
	name := *out
	if name == "" {
		name = "stdout"
		if _, err := stdout.Write(res.Config); err != nil {
			return fmt.Errorf("writing the config: %w", err)
		}
	} else if err := os.WriteFile(name, res.Config, 0o644); err != nil {
		return fmt.Errorf("writing the config: %w", err)
	}
	c, err := config.Parse(res.Config, name)
	if err == nil {
		var p *plan.Plan
		if p, err = plan.Compile(c); err == nil {
			fmt.Fprintf(stderr, "spillway import: wrote %s: valid; %d backend services, %d endpoints; %d not carried (listed above)\n", name, len(p.Services), len(p.Endpoints), len(res.Notes))
			return nil
		}
	}
	fmt.Fprintln(stderr, err)
	fmt.Fprintf(stderr, "spillway import: wrote %s, but it does not validate yet: fix the problems above (the notes above say what the input lacked)\n", name)
	return exitCode(1)
}
