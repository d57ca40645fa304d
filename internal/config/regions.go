package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// builtinRegions are the Google Cloud regions Spillway knows without a
// regions[] entry: plan.KnownRegionLocation has their locations and
// plan.KnownRTT their round-trip times. Sorted.
var builtinRegions = []string{
	"africa-south1",
	"asia-east1", "asia-east2",
	"asia-northeast1", "asia-northeast2", "asia-northeast3",
	"asia-south1", "asia-south2",
	"asia-southeast1", "asia-southeast2",
	"australia-southeast1", "australia-southeast2",
	"europe-central2", "europe-north1", "europe-southwest1",
	"europe-west1", "europe-west10", "europe-west12", "europe-west2", "europe-west3",
	"europe-west4", "europe-west6", "europe-west8", "europe-west9",
	"me-central1", "me-west1",
	"northamerica-northeast1", "northamerica-northeast2",
	"southamerica-east1", "southamerica-west1",
	"us-central1", "us-east1", "us-east4", "us-east5", "us-south1",
	"us-west1", "us-west2", "us-west3", "us-west4",
}

// BuiltinRegion reports whether name is a Google Cloud region Spillway
// knows without a regions[] entry.
func BuiltinRegion(name string) bool {
	_, ok := slices.BinarySearch(builtinRegions, name)
	return ok
}

// BuiltinRegions returns the built-in Google Cloud regions, sorted.
func BuiltinRegions() []string { return slices.Clone(builtinRegions) }

// RegionHint is the fix hint for an unknown region name: a "did you
// mean", the regions the config knows, a few built-in regions spelled
// like it, and how to declare a region of one's own.
func RegionHint(name string, configured []string) string {
	var parts []string
	all := append(slices.Clone(configured), builtinRegions...)
	if c := closest(name, all); c != "" {
		parts = append(parts, fmt.Sprintf("did you mean %q?", c))
	}
	use := "use "
	if len(configured) > 0 {
		use += "a region of this config (" + strings.Join(configured, ", ") + ") or "
	}
	use += "a built-in Google Cloud region such as " + strings.Join(nearestNames(name, builtinRegions, 3), ", ")
	parts = append(parts, use+", or add it to regions[] with a latitude and longitude or rttMs")
	return strings.Join(parts, " ")
}

// nearestNames returns the n candidates spelled most like s (edit
// distance, ties by name).
func nearestNames(s string, candidates []string, n int) []string {
	type scored struct {
		name string
		d    int
	}
	var l []scored
	for _, c := range candidates {
		l = append(l, scored{c, editDistance(strings.ToLower(s), strings.ToLower(c))})
	}
	sort.SliceStable(l, func(i, j int) bool {
		if l[i].d != l[j].d {
			return l[i].d < l[j].d
		}
		return l[i].name < l[j].name
	})
	var out []string
	for i := 0; i < n && i < len(l); i++ {
		out = append(out, l[i].name)
	}
	return out
}
