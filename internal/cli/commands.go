package cli

import (
	"context"
	"io"
)

type command func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// extraCommands maps the commands that live in their own files.
func extraCommands(name string) (command, bool) {
	switch name {
	}
	return nil, false
}
