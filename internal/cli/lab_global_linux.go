//go:build linux

package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spillwaylb/spillway/internal/globallab"
	"github.com/spillwaylb/spillway/internal/netlab"
)

// runGlobal runs spillway lab --global.
func (c *labCmd) runGlobal(ctx context.Context, stdout, stderr io.Writer) error {
	if err := netlab.Check(); err != nil {
		fmt.Fprintf(stderr, "spillway lab --global: %v\n", err)
		return exitCode(1)
	}
	o := globallab.Options{Progress: stderr}
	if c.set["rate"] {
		o.Rate = c.rate
	}
	rep, err := globallab.Run(ctx, o)
	if rep != nil && (err == nil || len(rep.Rows) > 0) {
		write := globallab.WriteTable
		if c.asJSON {
			write = globallab.WriteJSON
		}
		if werr := write(stdout, rep); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return err
	}
	if rep.Failed() {
		fmt.Fprintln(stderr, "spillway lab --global: a row's verdict is FAIL")
		return exitCode(1)
	}
	return nil
}
