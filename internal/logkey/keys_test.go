package logkey

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// logMethods are the methods of *slog.Logger and of Temporal's log.Logger that take key-value
// pairs, with the index of the first key among their arguments.
var logMethods = map[string]int{
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1, "With": 0,
	"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2,
}

// attrFuncs are slog's attribute constructors, whose first argument is the key.
var attrFuncs = map[string]bool{"String": true, "Int": true, "Int64": true, "Uint64": true,
	"Float64": true, "Bool": true, "Duration": true, "Time": true, "Any": true, "Group": true}

// notProduct are the top-level folders whose code is not shipped (the harness, the tests, the
// developer commands and examples): their logs may name fields as they like.
var notProduct = map[string]bool{"testkit": true, "tests": true, "cmd": true, "examples": true, "scripts": true}

// TestProductLogsNameFieldsWithTheConstants fails on a log call of product code that names a
// field with a string literal instead of a constant of this package, so that a new spelling
// ("err" beside "error") cannot creep back.
func TestProductLogsNameFieldsWithTheConstants(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if top := strings.Split(rel, string(filepath.Separator))[0]; notProduct[top] || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, lit := range literalKeys(f) {
			found = append(found, rel+":"+strconv.Itoa(fset.Position(lit.Pos()).Line)+": "+lit.Value)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("log calls that name a field with a literal instead of a logkey constant:\n%s", strings.Join(found, "\n"))
	}
}

// literalKeys returns the string literals that log calls in f use as field names.
func literalKeys(f *ast.File) []*ast.BasicLit {
	var out []*ast.BasicLit
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		key := func(e ast.Expr) {
			if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				out = append(out, lit)
			}
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == "slog" && attrFuncs[sel.Sel.Name] && len(call.Args) > 0 {
			key(call.Args[0])
			return true
		}
		first, ok := logMethods[sel.Sel.Name]
		if !ok || (sel.Sel.Name == "With" && len(call.Args)%2 != 0) {
			return true
		}
		if first > 0 {
			// A log call's message is a string; other methods of these names are not logs.
			if len(call.Args) < first {
				return true
			}
			if lit, ok := call.Args[first-1].(*ast.BasicLit); !ok || lit.Kind != token.STRING {
				return true
			}
		}
		for i := first; i < len(call.Args); i += 2 {
			key(call.Args[i])
		}
		return true
	})
	return out
}
