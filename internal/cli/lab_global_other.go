//go:build !linux

package cli

import (
	"context"
	"fmt"
	"io"
)

// runGlobal: the global lab is built of Linux network namespaces.
func (c *labCmd) runGlobal(ctx context.Context, stdout, stderr io.Writer) error {
	fmt.Fprintln(stderr, "spillway lab --global: needs Linux (it builds network namespaces)")
	return exitCode(1)
}
