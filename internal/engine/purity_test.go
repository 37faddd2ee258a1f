package engine

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forbiddenImports are the import path prefixes no package under
// internal/engine may use (docs/architecture.md, principle 2: the engine is
// pure): the runtime layer, the HTTP framework, the policy and plugin
// engines and the store backends.
var forbiddenImports = []string{
	"github.com/breakwater-dev/breakwater/internal/runtime",
	"github.com/breakwater-dev/breakwater/internal/policies",
	"github.com/breakwater-dev/breakwater/internal/plugins",
	"github.com/gofiber/",
	"github.com/valyala/fasthttp",
	"github.com/open-policy-agent/",
	"github.com/tetratelabs/wazero",
	"github.com/dgraph-io/badger",
	"github.com/redis/go-redis",
}

// TestEnginePackagesArePure parses the imports of every non-test Go file
// of every package under internal/engine and fails on a forbidden one.
func TestEnginePackagesArePure(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbiddenImports {
				if strings.HasPrefix(p, bad) {
					t.Errorf("%s imports %s: the engine must not depend on %s", path, p, bad)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 20 {
		t.Fatalf("parsed only %d files: is the test running in internal/engine?", files)
	}
}
