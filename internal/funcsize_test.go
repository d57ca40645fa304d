package internal_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// sizeChecked lists the packages whose functions must stay small enough to
// read: at most maxFuncLines lines and cyclomatic complexity maxFuncComplexity.
var sizeChecked = []string{"proxy", "gslb", "plan", "engine", "config", "cli", "fleet", "control", "probe", "route", "sim", "lab", "armor", "serve", "serve/admin", "serve/dashboard", "serve/report", "serve/accesslog", "serve/tlsreload", "serve/connlimit", "serve/servetest", "health", "outlier", "lint", "dnssec", "netcut", "procs", "waf"}

const (
	maxFuncLines      = 80
	maxFuncComplexity = 20
)

// funcSize is one function's measured length and complexity.
type funcSize struct {
	name       string // pkg.Recv.Name
	pos        string // file:line
	lines      int
	complexity int
}

// TestFunctionSize fails naming each function in sizeChecked that is longer
// than maxFuncLines or more complex than maxFuncComplexity.
//
// The rule, measured with go/ast only:
//   - Only non-test function declarations (FuncDecl in files not ending in
//     _test.go) count; function literals are measured as part of the
//     declaration that contains them.
//   - Lines: the line span from the first statement of the body to the end
//     of the last one (so the signature, the braces and a doc comment do not
//     count; blank lines and comments between statements do). Composite
//     literals count like any other statement: a long literal inside a
//     function is code to read. Data tables belong in package-level vars,
//     which are not functions and are not measured.
//   - Cyclomatic complexity: 1, plus 1 for each if, for, range, case clause
//     other than default (switch and type switch), comm clause other than
//     default (select), && and ||.
func TestFunctionSize(t *testing.T) {
	for _, name := range sizeChecked {
		sizes, err := measurePackage(filepath.Join(".", name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, s := range sizes {
			if s.lines > maxFuncLines || s.complexity > maxFuncComplexity {
				t.Errorf("%s (%s): %d lines, complexity %d; limit %d lines, complexity %d",
					s.name, s.pos, s.lines, s.complexity, maxFuncLines, maxFuncComplexity)
			}
		}
	}
	if path := os.Getenv("FUNCSIZE_REPORT"); path != "" {
		writeSizeReport(t, path)
	}
}

// writeSizeReport writes every measured function, largest first, as
// tab-separated "name lines complexity" for before/after comparisons.
func writeSizeReport(t *testing.T, path string) {
	var all []funcSize
	for _, name := range sizeChecked {
		sizes, err := measurePackage(filepath.Join(".", name))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, sizes...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	var b strings.Builder
	for _, s := range all {
		fmt.Fprintf(&b, "%s\t%d\t%d\n", s.name, s.lines, s.complexity)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// measurePackage parses the non-test Go files of dir and measures every
// function declaration in them.
func measurePackage(dir string) ([]funcSize, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var sizes []funcSize
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			sizes = append(sizes, funcSize{
				name:       filepath.Base(dir) + "." + funcName(fd),
				pos:        fmt.Sprintf("%s:%d", n, fset.Position(fd.Pos()).Line),
				lines:      bodyLines(fset, fd.Body),
				complexity: complexity(fd.Body),
			})
		}
	}
	return sizes, nil
}

// funcName is Name for functions and Recv.Name for methods.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// bodyLines is the line span of body's statements.
func bodyLines(fset *token.FileSet, body *ast.BlockStmt) int {
	if len(body.List) == 0 {
		return 0
	}
	first := fset.Position(body.List[0].Pos()).Line
	last := fset.Position(body.List[len(body.List)-1].End()).Line
	return last - first + 1
}

// complexity is the cyclomatic complexity of body, counted as documented on
// TestFunctionSize.
func complexity(body *ast.BlockStmt) int {
	c := 1
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if x.List != nil {
				c++
			}
		case *ast.CommClause:
			if x.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if x.Op == token.LAND || x.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}
