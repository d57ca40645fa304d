package config

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// maxErrors caps how many errors Parse reports; past it the rest are
// dropped, because the first twenty are enough to start fixing.
const maxErrors = 20

// FieldError is one problem in a configuration file: where it is, which
// field it concerns, what is wrong and how to fix it.
type FieldError struct {
	// File is the path of the configuration file (empty when unknown).
	File string
	// Line and Column are 1-based positions in File (0 when unknown).
	Line, Column int
	// Path is the field path, e.g. backendServices[1].backends[0].capacityScaler
	// (empty for the document itself).
	Path string
	// Msg says what is wrong.
	Msg string
	// Fix says how to repair it (may be empty).
	Fix string
}

// Error renders the error as "FILE:LINE: PATH: MSG (fix: FIX)", leaving out
// the parts that are empty.
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Fix != "" {
		b.WriteString(" (fix: ")
		b.WriteString(e.Fix)
		b.WriteByte(')')
	}
	return b.String()
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

// Unwrap returns the individual errors, for errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// sortAndCap orders errors by position (errors without a line last, in
// the order they were found) and keeps at most maxErrors.
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
	if len(es) > maxErrors {
		es = es[:maxErrors]
	}
	return es
}
