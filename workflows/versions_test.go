package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryGetVersionIsListed: every workflow.GetVersion call of the
// workflows names its change and version by constants declared in
// versions.go, so that one file lists every marker and what it guards.
func TestEveryGetVersionIsListed(t *testing.T) {
	fset := token.NewFileSet()
	listed := map[string]bool{}
	vf, err := parser.ParseFile(fset, "versions.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range vf.Scope.Objects {
		listed[obj.Name] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "GetVersion" || len(call.Args) != 4 {
				return true
			}
			calls++
			for _, arg := range []ast.Expr{call.Args[1], call.Args[3]} {
				id, ok := arg.(*ast.Ident)
				if !ok || !listed[id.Name] {
					t.Errorf("%s: GetVersion's change and version must be constants of versions.go, got %s", fset.Position(call.Pos()), exprString(arg))
				}
			}
			return true
		})
	}
	if calls == 0 {
		t.Fatal("found no GetVersion call: the test reads the wrong files")
	}
}

func exprString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.BasicLit:
		return x.Value
	}
	return "an expression"
}
