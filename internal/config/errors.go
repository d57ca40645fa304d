package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// maxErrors caps how many errors Parse reports; past it the rest are
// dropped, because the first twenty are enough to start fixing.
const maxErrors = 20

// maxPlaces caps how many of a repeated mistake's other places an
// error's text lists.
const maxPlaces = 10

// FieldError is one problem in a configuration file: where it is, which
// field it concerns, what is wrong and how to fix it.
type FieldError struct {
	// File is the path of the configuration file (empty when unknown).
	File string
	// Line and Column are 1-based positions in File (0 when unknown).
	Line, Column int
	// Path is the field path, e.g.
	// backendServices[bs-web].backends[mig-a].capacityScaler: a list's
	// element is named by its name (a backend by its group, a weighted
	// backend service by its service, a route rule by its priority), or
	// by its index when it has none or shares it with a sibling
	// (empty for the document itself).
	Path string
	// Msg says what is wrong.
	Msg string
	// Fix says how to repair it (may be empty).
	Fix string
	// Source holds the text of File up to line Line: line Line last,
	// after the line before it, for Explain (empty when unknown).
	Source []string
	// Also lists the other places with the same mistake: the same
	// message and fix for the same field of other list elements (the
	// same typo in six backends is one error with five more places).
	Also []Place
}

// Place is where a repeated mistake was made again.
type Place struct {
	Line, Column int
	Path         string
}

// Error renders the error as "FILE:LINE:COLUMN: PATH: MSG (fix: FIX)",
// leaving out the parts that are empty, then the other places of a
// repeated mistake.
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.head())
	if e.Fix != "" {
		b.WriteString(" (fix: ")
		b.WriteString(e.Fix)
		b.WriteByte(')')
	}
	if len(e.Also) > 0 {
		b.WriteString("; the same in ")
		b.WriteString(e.places())
	}
	return b.String()
}

// head is "FILE:LINE:COLUMN: PATH: MSG".
func (e *FieldError) head() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(position{e.Line, e.Column}.suffix())
		b.WriteString(": ")
	} else if e.Line > 0 {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteString(", column ")
			b.WriteString(strconv.Itoa(e.Column))
		}
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// places renders Also: "2 more places: P (line 40), Q (line 52)".
func (e *FieldError) places() string {
	parts := make([]string, 0, min(len(e.Also), maxPlaces)+1)
	for i, p := range e.Also {
		if i == maxPlaces {
			parts = append(parts, fmt.Sprintf("and %d more", len(e.Also)-maxPlaces))
			break
		}
		s := p.Path
		if p.Line > 0 {
			s += " (line " + strconv.Itoa(p.Line) + ")"
		}
		parts = append(parts, s)
	}
	n := "1 more place"
	if len(e.Also) > 1 {
		n = strconv.Itoa(len(e.Also)) + " more places"
	}
	return n + ": " + strings.Join(parts, ", ")
}

// suffix is ":LINE:COLUMN", ":LINE" or "" as far as p is known.
func (p position) suffix() string {
	switch {
	case p.line <= 0:
		return ""
	case p.col <= 0:
		return ":" + strconv.Itoa(p.line)
	}
	return ":" + strconv.Itoa(p.line) + ":" + strconv.Itoa(p.col)
}

// Explain renders the error for a person at a terminal, as rustc and
// terraform do: the error's first line, the source line with a caret
// under the column (after the line before it), the fix, and the other
// places of a repeated mistake, one a line.
func (e *FieldError) Explain() string {
	var b strings.Builder
	b.WriteString(e.head())
	b.WriteByte('\n')
	gutter := strings.Repeat(" ", len(strconv.Itoa(e.Line))+1)
	if len(e.Source) > 0 && e.Line > 0 {
		fmt.Fprintf(&b, "%s|\n", gutter)
		first := e.Line - len(e.Source) + 1
		for i, src := range e.Source {
			fmt.Fprintf(&b, "%*d | %s\n", len(gutter)-1, first+i, expandTabs(src))
		}
		if e.Column > 0 {
			fmt.Fprintf(&b, "%s| %s\n", gutter, caret(e.Source[len(e.Source)-1], e.Column))
		}
	}
	if e.Fix != "" {
		fmt.Fprintf(&b, "%s= fix: %s\n", gutter, e.Fix)
	}
	if len(e.Also) > 0 {
		n := "1 more place"
		if len(e.Also) > 1 {
			n = strconv.Itoa(len(e.Also)) + " more places"
		}
		fmt.Fprintf(&b, "%s= the same in %s:\n", gutter, n)
		for _, p := range e.Also {
			fmt.Fprintf(&b, "%s    %s%s: %s\n", gutter, e.File, position{p.Line, p.Column}.suffix(), p.Path)
		}
	}
	return b.String()
}

// expandTabs shows a tab as one space, so that the caret, which counts
// characters, stays under its column.
func expandTabs(s string) string { return strings.ReplaceAll(s, "\t", " ") }

// caret is a line of spaces and carets that marks, under src, the token
// that starts at the 1-based column col: a quoted string, or a run of
// characters up to a space or one of ",:[]{}#" (at least one caret).
func caret(src string, col int) string {
	runes := []rune(src)
	start := min(col-1, len(runes))
	end := start + 1
	if start < len(runes) {
		switch r := runes[start]; {
		case r == '"' || r == '\'':
			for end < len(runes) && runes[end] != r {
				end++
			}
			end = min(end+1, len(runes))
		case !strings.ContainsRune(" \t,:[]{}#", r):
			for end < len(runes) && !strings.ContainsRune(" \t,:[]{}#", runes[end]) {
				end++
			}
		}
	}
	return strings.Repeat(" ", start) + strings.Repeat("^", end-start)
}

// Errors is a list of configuration problems. It is what Parse, Load and
// Validate return when the configuration is not usable.
type Errors []*FieldError

// Error renders one error per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Explain renders every error with FieldError.Explain, a blank line
// between two.
func (es Errors) Explain() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Explain()
	}
	return strings.Join(parts, "\n")
}

// Unwrap returns the individual errors, for errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Explain renders err for a person at a terminal: configuration errors
// (an Errors anywhere in err's chain) with Errors.Explain, after the
// text that wraps them if any; any other error as err.Error().
func Explain(err error) string {
	var es Errors
	if !errors.As(err, &es) {
		return err.Error()
	}
	text := es.Explain()
	if outer := err.Error(); outer != es.Error() {
		if prefix, ok := strings.CutSuffix(outer, es.Error()); ok {
			return prefix + "\n" + text
		}
	}
	return text
}

// sortAndCap orders errors by position (errors without a line last, in
// the order they were found), reports a repeated mistake once (see
// group) and keeps at most maxErrors.
func sortAndCap(es Errors) Errors {
	slices.SortStableFunc(es, func(a, b *FieldError) int {
		la, lb := a.Line, b.Line
		if la == 0 {
			la = int(^uint(0) >> 1)
		}
		if lb == 0 {
			lb = int(^uint(0) >> 1)
		}
		if c := cmp.Compare(la, lb); c != 0 {
			return c
		}
		return cmp.Compare(a.Column, b.Column)
	})
	es = group(es)
	if len(es) > maxErrors {
		es = es[:maxErrors]
	}
	return es
}

// group folds errors with the same message and fix on the same field of
// different list elements (their paths equal but for what is between
// brackets) into the first of them, whose Also lists the others' places.
func group(es Errors) Errors {
	first := map[string]*FieldError{}
	out := es[:0:0]
	for _, e := range es {
		key := pathShape(e.Path) + "\x00" + e.Msg + "\x00" + e.Fix
		if g, ok := first[key]; ok && e.Path != g.Path {
			g.Also = append(g.Also, Place{Line: e.Line, Column: e.Column, Path: e.Path})
			continue
		} else if !ok {
			first[key] = e
		}
		out = append(out, e)
	}
	return out
}

// pathShape is path with what is between brackets left out:
// backendServices[].backends[].balancingMode.
func pathShape(path string) string {
	var b strings.Builder
	depth := 0
	for _, r := range path {
		switch {
		case r == '[':
			depth++
			if depth == 1 {
				b.WriteRune(r)
			}
		case r == ']' && depth > 0:
			depth--
			if depth == 0 {
				b.WriteRune(r)
			}
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}
