package config

import (
	"fmt"
	"strings"
)

// closest returns the candidate nearest to s, for "did you mean" hints, or
// "" when none is close enough to be a plausible typo. Case, '-' and '_'
// are ignored first (timeout_sec → timeoutSec); then the optimal string
// alignment distance (a swap of two neighbours counts once) must be at most
// 1 for short words, 2 for words of 5+ letters and 3 for 12+ letters.
func closest(s string, candidates []string) string {
	norm := func(x string) string {
		x = strings.ToLower(x)
		x = strings.ReplaceAll(x, "_", "")
		return strings.ReplaceAll(x, "-", "")
	}
	ns := norm(s)
	for _, c := range candidates {
		if c != s && norm(c) == ns {
			return c
		}
	}
	limit := 1
	switch {
	case len(s) >= 12:
		limit = 3
	case len(s) >= 5:
		limit = 2
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		if c == s {
			continue
		}
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b
// (insertions, deletions, substitutions and adjacent transpositions).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rolling rows: two back, previous, current.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// didYouMean renders a fix hint for a name that is not among known:
// `did you mean "x"? known: a, b` (the known list is left out when there
// are too many to be useful, or when what is "" ).
func didYouMean(name string, known []string, what string) string {
	var parts []string
	if c := closest(name, known); c != "" {
		parts = append(parts, fmt.Sprintf("did you mean %q?", c))
	}
	switch {
	case len(known) == 0 && what != "":
		parts = append(parts, fmt.Sprintf("no %s is defined", what))
	case len(known) > 0 && len(known) <= 12:
		parts = append(parts, "known: "+strings.Join(known, ", "))
	}
	return strings.Join(parts, " ")
}

// oneOf renders a fix hint for an enum value: `did you mean "RATE"? use one
// of RATE, UTILIZATION`.
func oneOf(value string, allowed []string) string {
	hint := "use one of " + strings.Join(allowed, ", ")
	if c := closest(value, allowed); c != "" {
		return fmt.Sprintf("did you mean %q? %s", c, hint)
	}
	return hint
}

// Closest returns the candidate nearest to s for a "did you mean" hint,
// or "" when none is close enough to be a typo: the rule of the config's
// errors, which the command line uses for commands and flags too.
func Closest(s string, candidates []string) string { return closest(s, candidates) }
