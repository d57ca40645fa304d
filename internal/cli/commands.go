package cli

import (
	"context"
	"io"
)

type command func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// extraCommands maps the commands that live in their own files.
func extraCommands(name string) (command, bool) {
	switch name {
	case "lab":
		return runLab, true
	case "serve":
		return runServe, true
	case "get-health":
		return runGetHealth, true
	case "validate":
		return runValidate, true
	case "import":
		return runImport, true
	case "dnssec":
		return runDNSSEC, true
	case "dns":
		return runDNS, true
	case "config":
		return runConfig, true
	case "ctl":
		return runCtl, true
	case "cache":
		return runCache, true
	}
	return nil, false
}
