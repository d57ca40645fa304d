// Command spillway is a self-hostable global load balancer: an HTTP/1.1 and
// HTTP/2 reverse proxy, a simulator and a local lab, all driven by one
// decision engine that implements Google Cloud's global external
// Application Load Balancer model. Run `spillway help` for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spillwaylb/spillway/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
