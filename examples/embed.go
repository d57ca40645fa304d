// Package examples embeds the example configurations shipped with Spillway,
// so commands such as `spillway lab` can run them without a checkout.
package examples

import (
	"embed"
	"io/fs"
)

//go:embed seed-70-30/*.yaml
var seed7030 embed.FS

//go:embed winticket/config.yaml
var winticket []byte

// Winticket returns seed 003's config (examples/winticket/config.yaml):
// bs-default over a Tokyo and an Osaka NEG with outlier detection, and the
// bs-tokyo / bs-osaka services for a manual switch.
func Winticket() []byte { return append([]byte(nil), winticket...) }

// Seed7030 returns the configs of seed 000's 70/30 split (with-policy.yaml,
// no-policy.yaml, baseline.yaml), rooted at the seed-70-30 directory.
func Seed7030() fs.FS {
	sub, err := fs.Sub(seed7030, "seed-70-30")
	if err != nil {
		// fs.Sub only fails on an invalid path, and the path is a constant.
		panic(err)
	}
	return sub
}
