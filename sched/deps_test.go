package sched

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sched is pure: it links neither SSH nor bbolt nor any gssh package but
// the dependency-free job, gpuinfo and units, and it never reads the clock.
func TestPure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case dep == "github.com/gssh/gssh/sched", dep == "github.com/gssh/gssh/job", dep == "github.com/gssh/gssh/gpuinfo", dep == "github.com/gssh/gssh/units":
		case strings.Contains(dep, "."): // not the standard library
			t.Errorf("sched links %s", dep)
		}
	}
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && (sel.Sel.Name == "Now" || sel.Sel.Name == "Since" || sel.Sel.Name == "Sleep") {
					t.Errorf("%s: sched reads the clock (time.%s); take now as an input", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
}
