// Package paralleltest raises how many parallel tests a package runs at
// once, for packages whose tests mostly wait (on timeouts, leases, probe
// intervals) rather than compute. It is imported by tests only.
//
// go test runs at most -parallel tests of a package at once, GOMAXPROCS
// by default: 2 on a 2-core machine, although a waiting test uses next to
// no CPU. The fleet tests, for example, use about 9 s of CPU in 131 s
// run one at a time; 8 at a time they take 25 s.
package paralleltest

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// Main runs m's tests with at most n parallel tests at once unless the
// command line sets -parallel (which then wins), and exits with m's
// result. Call it from TestMain.
func Main(m *testing.M, n int) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic("paralleltest: " + err.Error())
		}
	}
	os.Exit(m.Run())
}
