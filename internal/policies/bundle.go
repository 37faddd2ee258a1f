package policies

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/breakwater-dev/breakwater/internal/regfile"
)

//go:embed bundle/.manifest bundle/*.rego
var bundleFS embed.FS

const (
	bundleRoot   = "bundle"
	manifestName = ".manifest"
	testSuffix   = "_test.rego"
	// builtinPrefix names the embedded files in module keys and locations
	// ("builtin/restate.rego"), apart from operator files.
	builtinPrefix = "builtin/"
	// OperatorPackage is the package, or package prefix, every operator
	// .rego file must declare (see the package documentation).
	OperatorPackage = "breakwater.operator"
)

// deniedBuiltins are Rego built-ins operator policies may not call: the
// failure path must not reach the network or leak the runtime environment.
var deniedBuiltins = map[string]bool{
	"http.send":          true,
	"net.lookup_ip_addr": true,
	"opa.runtime":        true,
}

// source is one policy file: its module key (also its location in errors)
// and text.
type source struct {
	name string
	text string
}

// isTest reports whether s is a test file.
func (s source) isTest() bool { return strings.HasSuffix(s.name, testSuffix) }

// builtinBundle is the embedded bundle, read once. It is immutable.
type builtinBundle struct {
	revision string
	sources  []source // sorted by name
	// modules are the parsed sources by name; the compiler copies them,
	// so one parse serves every compilation.
	modules map[string]*ast.Module
}

// loadBuiltin reads and parses the embedded bundle.
func loadBuiltin() (*builtinBundle, error) {
	raw, err := bundleFS.ReadFile(path.Join(bundleRoot, manifestName))
	if err != nil {
		return nil, fmt.Errorf("read built-in bundle manifest: %w", err)
	}
	var man struct {
		Revision string `json:"revision"`
	}
	if err := json.Unmarshal(raw, &man); err != nil {
		return nil, fmt.Errorf("parse built-in bundle manifest: %w", err)
	}
	if man.Revision == "" {
		return nil, errors.New("built-in bundle manifest has no revision")
	}
	entries, err := fs.ReadDir(bundleFS, bundleRoot)
	if err != nil {
		return nil, fmt.Errorf("read built-in bundle: %w", err)
	}
	b := &builtinBundle{revision: man.Revision, modules: map[string]*ast.Module{}}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".rego") {
			continue
		}
		text, err := bundleFS.ReadFile(path.Join(bundleRoot, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read built-in %s: %w", e.Name(), err)
		}
		s := source{name: builtinPrefix + e.Name(), text: string(text)}
		m, err := parseModule(s)
		if err != nil {
			return nil, fmt.Errorf("built-in bundle: %w", err)
		}
		b.sources = append(b.sources, s)
		b.modules[s.name] = m
	}
	return b, nil
}

// files returns the names of the bundle's files, the manifest first.
func (b *builtinBundle) files() []string {
	out := []string{manifestName}
	for _, s := range b.sources {
		out = append(out, strings.TrimPrefix(s.name, builtinPrefix))
	}
	return out
}

// policyModules returns the bundle's non-test modules, plus its tests when
// tests is true, in a new map.
func (b *builtinBundle) policyModules(tests bool) map[string]*ast.Module {
	out := make(map[string]*ast.Module, len(b.modules))
	for _, s := range b.sources {
		if tests || !s.isTest() {
			out[s.name] = b.modules[s.name]
		}
	}
	return out
}

// parseModule parses one Rego v1 file.
func parseModule(s source) (*ast.Module, error) {
	m, err := ast.ParseModuleWithOpts(s.name, s.text, ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("%s: empty module", s.name)
	}
	return m, nil
}

// capabilities are this OPA version's capabilities without deniedBuiltins.
func capabilities() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	c.Builtins = slices.DeleteFunc(c.Builtins, func(b *ast.Builtin) bool { return deniedBuiltins[b.Name] })
	return c
}

// newCompiler returns a compiler for Breakwater policies: Rego v1 and the
// restricted capabilities. print statements are kept for tests (their
// output shows in test results) and erased for serving.
func newCompiler(print bool) *ast.Compiler {
	return ast.NewCompiler().
		WithCapabilities(capabilities()).
		WithDefaultRegoVersion(ast.RegoV1).
		WithEnablePrintStatements(print)
}

// MaxPolicyFileBytes bounds one operator .rego file. A file over it, or a
// .rego path that is not a regular file (a named pipe, a device), rejects
// the file set at once (see regfile.Read).
const MaxPolicyFileBytes = 1 << 20

// readPolicyDir reads every .rego file under dir, recursively, skipping
// names that start with "." (editor swap files, Kubernetes ConfigMap
// "..data" directories: their files also appear as top-level links). A
// missing dir is an empty set. Names are dir-relative, slash-separated,
// sorted.
func readPolicyDir(dir string) ([]source, error) {
	if dir == "" {
		return nil, nil
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var out []source
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".rego") {
			return nil
		}
		text, err := regfile.Read(p, MaxPolicyFileBytes)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out = append(out, source{name: filepath.ToSlash(rel), text: string(text)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read policy directory %s: %w", dir, err)
	}
	slices.SortFunc(out, func(a, b source) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// hashSources is a digest of a file set's names and contents.
func hashSources(srcs []source) string {
	h := sha256.New()
	for _, s := range srcs {
		fmt.Fprintf(h, "%d:%s\x00%d:", len(s.name), s.name, len(s.text))
		h.Write([]byte(s.text))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// inOperatorPackage reports whether package path p (as "data.a.b") is
// OperatorPackage, its test package OperatorPackage+"_test", or below
// either.
func inOperatorPackage(p ast.Ref) bool {
	s := strings.TrimPrefix(p.String(), "data.")
	for _, root := range [...]string{OperatorPackage, OperatorPackage + "_test"} {
		if s == root || strings.HasPrefix(s, root+".") {
			return true
		}
	}
	return false
}
