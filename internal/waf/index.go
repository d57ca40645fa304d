package waf

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// ruleIndex maps each CRS detection rule of the category files to its
// paranoia level (1-4). Rules without a paranoia-level tag (paranoia
// skips, counters that other rules read) are not signatures and are left
// out, as Google leaves them out of its signature tables.
type ruleIndex map[int]int

// loadIndex reads the category files' rule IDs and paranoia-level tags
// from the CRS text: a directive starts at a line's first column (chained
// rules are indented under it), lines ending in a backslash continue, and
// its first id: action and paranoia-level/N tag are the rule's.
func loadIndex(fsys fs.FS) (ruleIndex, error) {
	idx := ruleIndex{}
	seen := map[string]bool{}
	for _, c := range categories {
		if seen[c.file] {
			continue
		}
		seen[c.file] = true
		b, err := fs.ReadFile(fsys, "@owasp_crs/"+c.file)
		if err != nil {
			return nil, fmt.Errorf("reading the embedded CRS: %w", err)
		}
		for _, d := range directives(string(b)) {
			id, level := directiveRule(d)
			if id > 0 && level > 0 {
				if id/1000 != c.prefix {
					return nil, fmt.Errorf("CRS file %s holds rule %d, outside %d000-%d999", c.file, id, c.prefix, c.prefix)
				}
				idx[id] = level
			}
		}
	}
	return idx, nil
}

// directives splits a rule file into top-level directives (a directive's
// chained rules included), comments and blank lines dropped.
func directives(text string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	cont := false
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !cont && (trimmed == "" || strings.HasPrefix(trimmed, "#")):
			continue
		case !cont && line[0] != ' ' && line[0] != '\t':
			flush()
		}
		cur.WriteString(trimmed)
		cur.WriteByte(' ')
		cont = strings.HasSuffix(trimmed, "\\")
	}
	flush()
	return out
}

// directiveRule returns a directive's rule ID and paranoia level (0 when
// absent).
func directiveRule(d string) (id, level int) {
	// The action list opens with a quote; id is its first action or
	// follows a comma.
	for _, mark := range []string{`"id:`, `,id:`} {
		if i := strings.Index(d, mark); i >= 0 {
			j := i + len(mark)
			for j < len(d) && '0' <= d[j] && d[j] <= '9' {
				j++
			}
			id, _ = strconv.Atoi(d[i+len(mark) : j])
			break
		}
	}
	if i := strings.Index(d, "paranoia-level/"); i >= 0 && i+15 < len(d) {
		level = int(d[i+15] - '0')
		if level < 1 || level > 4 {
			level = 0
		}
	}
	return id, level
}
