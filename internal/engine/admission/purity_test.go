package admission

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestPackageIsPure enforces the engine's rules on the package's own code:
// only the standard library, the engine root and the clock interfaces
// (internal/clock, itself standard library only) are imported, no goroutine
// is started, and of the engine only pure helpers are used — in particular
// nothing that records failures, so local admission errors can never reach
// breakers, cooldowns or lockouts (docs/architecture.md, principle 5).
func TestPackageIsPure(t *testing.T) {
	allowedEngine := map[string]bool{"Profile": true, "ProfileAPIKey": true, "ParseResetText": true, "MaxRetryHint": true}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		engineName := ""
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case path == "github.com/breakwater-dev/breakwater/internal/engine":
				engineName = "engine"
			case path == "github.com/breakwater-dev/breakwater/internal/clock":
			case strings.Contains(strings.Split(path, "/")[0], "."):
				t.Errorf("%s imports %s: only the standard library, the engine root and internal/clock are allowed", name, path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: go statement at %v: no background goroutines", name, fset.Position(x.Pos()))
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && engineName != "" && id.Name == engineName && !allowedEngine[x.Sel.Name] {
					t.Errorf("%s uses engine.%s: not in the allowlist of pure helpers", name, x.Sel.Name)
				}
			}
			return true
		})
	}
}
