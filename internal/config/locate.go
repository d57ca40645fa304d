package config

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// yamlError parses data as document does (one document, and nothing
// after it) and returns the YAML library's first syntax error, or nil.
// A second document is not a syntax error: document reports it.
func yamlError(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// locateSyntaxError finds where in data the YAML syntax error err
// (yamlError(data)) is: its 1-based line and column.
//
// yaml.v3 reports a parser error at the start of the collection it was
// parsing (its "context mark"), not where parsing failed: an indentation
// mistake on line 22 of a file whose top-level mapping starts on line 3
// is reported on line 3. The mistake is where a prefix of the file
// first fails with the same error: the shortest such prefix of whole
// lines ends on its line, and the shortest prefix of that line on its
// column. Both are found by bisection (about 20 parses for a file of
// thousands of lines). Each prefix is parsed with what closes the
// quoted string and flow collections ([...], {...}, all of a JSON file)
// open at its end (see closing), so that it does not fail for stopping
// inside one. An error that is the end of the file itself (a bracket
// never closed) is looked for without closing them, and is placed
// between the unclosed collection's start and the end.
func locateSyntaxError(data []byte, err error) (line, col int) {
	want := err.Error()
	closeOpen := true
	fails := func(n int) bool {
		prefix := data[:n]
		if closeOpen {
			prefix = append(append(make([]byte, 0, n+8), data[:n]...), closing(data[:n])...)
		}
		e := yamlError(prefix)
		return e != nil && e.Error() == want
	}
	closeOpen = fails(len(data))
	lines := bytes.SplitAfter(data, []byte("\n"))
	ends := make([]int, len(lines)+1) // ends[i]: length of the first i lines
	for i, l := range lines {
		ends[i+1] = ends[i] + len(l)
	}
	// Invariant: the prefix of lo lines does not fail with err (the empty
	// one parses), that of hi lines does (all of data fails).
	lo, hi := 0, len(lines)
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fails(ends[mid]) {
			hi = mid
		} else {
			lo = mid
		}
	}
	text := lines[hi-1]
	clo, chi := 0, len(text)
	for chi-clo > 1 {
		mid := clo + (chi-clo)/2
		if fails(ends[hi-1] + mid) {
			chi = mid
		} else {
			clo = mid
		}
	}
	if chi == 0 {
		return hi, 1 // an empty last line
	}
	// The last byte of the shortest failing prefix is the culprit's.
	return hi, utf8.RuneCount(text[:chi-1]) + 1
}

// bareMessage is a yaml.v3 error message without "yaml: " and "line N: ".
func bareMessage(msg string) string {
	msg = strings.TrimPrefix(msg, "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if _, tail, ok := strings.Cut(rest, ": "); ok {
			return tail
		}
	}
	return msg
}

// indentationError reports whether a yaml.v3 error message is one that
// a line indented wrongly causes, so that the line's first token, not
// the character where the parser gave up, is the culprit.
func indentationError(msg string) bool {
	return strings.HasSuffix(msg, "did not find expected key") ||
		strings.HasSuffix(msg, "did not find expected '-' indicator")
}

// firstNonBlank is the 1-based column of the first character of line
// that is not a space or tab (1 for a blank line).
func firstNonBlank(line []byte) int {
	trimmed := bytes.TrimLeft(line, " \t")
	if len(bytes.TrimSpace(trimmed)) == 0 {
		return 1
	}
	return utf8.RuneCount(line[:len(line)-len(trimmed)]) + 1
}
