package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// position is where a configuration value came from: a line and column of the
// file, or the environment variable that overrode it.
type position struct {
	line, col int
	env       string
}

// decoder walks a yaml.Node tree into a Config by reflection over the yaml
// struct tags, recording the position of every value and collecting every
// error instead of stopping at the first. It is used once, by one goroutine.
type decoder struct {
	file      string
	lookupEnv func(string) (string, bool)
	readFile  func(string) ([]byte, error)
	errs      []FieldError
	bad       map[string]bool // paths whose value failed to decode
	fatal     bool            // decoding gave up: no validation
	nodes     int             // values decoded so far
	maxNodes  int             // bound on nodes (maxNodes; lowered in tests)
	pos       map[string]position
	fields    map[reflect.Type]map[string]int
}

// maxNodes bounds the values one document may decode to, and the entries
// merge keys may bring in, so aliases and merge keys that expand
// exponentially ("billion laughs") fail fast.
const maxNodes = 1 << 18

// pair is one key/value entry of a YAML mapping, after merge keys are expanded.
type pair struct {
	key, value *yaml.Node
}

var secretType = reflect.TypeFor[Secret]()

// syntaxLine extracts the line number from a go-yaml syntax error.
var syntaxLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func newDecoder(file string, opts Options) *decoder {
	return &decoder{
		file:      file,
		lookupEnv: opts.LookupEnv,
		readFile:  opts.ReadFile,
		pos:       make(map[string]position),
		bad:       make(map[string]bool),
		maxNodes:  maxNodes,
		fields:    make(map[reflect.Type]map[string]int),
	}
}

// errorf records an error at node n.
func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, FieldError{
		File:    d.file,
		Line:    n.Line,
		Column:  n.Column,
		Path:    path,
		Message: fmt.Sprintf(format, args...),
	})
}

// valueErrorf records an error at node n for a value that could not be
// decoded; validation then stays silent about path and its children.
func (d *decoder) valueErrorf(n *yaml.Node, path, format string, args ...any) {
	d.bad[path] = true
	d.errorf(n, path, format, args...)
}

// decodeDocument parses data as exactly one YAML document and decodes it into c.
func (d *decoder) decodeDocument(data []byte, c *Config) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return // an empty file is an all-defaults config
		}
		d.syntaxError(err)
		return
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		d.errorf(&extra, "", "the file holds more than one YAML document; only one is allowed")
	case !errors.Is(err, io.EOF):
		d.syntaxError(err)
	}
	root := &doc
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return
		}
		root = doc.Content[0]
	}
	d.decode(root, reflect.ValueOf(c).Elem(), "")
}

// syntaxError records a YAML syntax error with its line when go-yaml gives one.
func (d *decoder) syntaxError(err error) {
	d.fatal = true
	msg := err.Error()
	fe := FieldError{File: d.file, Message: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
	if m := syntaxLine.FindStringSubmatch(msg); m != nil {
		fe.Line, _ = strconv.Atoi(m[1])
		fe.Message = "invalid YAML: " + m[2]
	}
	d.errs = append(d.errs, fe)
}

// resolveAlias follows alias nodes to the anchored node.
func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node holds, for type errors. Scalars are quoted
// unless secret is set, so a misplaced credential is never echoed.
func describe(n *yaml.Node, secret bool) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "got a mapping"
	case yaml.SequenceNode:
		return "got a list"
	case yaml.ScalarNode:
		if secret {
			return "got a scalar"
		}
		return fmt.Sprintf("got %q", n.Value)
	}
	return "got an unsupported YAML node"
}

// decode decodes node n into v, recording n's position under path. A null
// node leaves v unchanged so the default applies.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if !d.spend(n, path, 1) {
		return
	}
	d.pos[path] = position{line: n.Line, col: n.Column}
	n = resolveAlias(n)
	if n.Kind == yaml.AliasNode {
		d.valueErrorf(n, path, "unresolved alias %q", n.Value)
		return
	}
	if isNull(n) {
		return
	}
	if v.Type() == secretType {
		d.decodeSecret(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		d.decodeSlice(n, v, path)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		d.decode(n, elem.Elem(), path)
		v.Set(elem)
	default:
		d.decodeScalar(n, v, path)
	}
}

// spend counts k more values against the document's bound (maxNodes). It
// reports false once the bound is reached: the first time, it records the
// one fatal error at n; decoding then unwinds without further work.
func (d *decoder) spend(n *yaml.Node, path string, k int) bool {
	if d.nodes >= d.maxNodes {
		return false
	}
	if d.nodes += k; d.nodes >= d.maxNodes {
		d.nodes = d.maxNodes
		d.fatal = true
		d.valueErrorf(n, path, "the document expands to %d values or more (aliases or merge keys nested too deeply?)", d.maxNodes)
		return false
	}
	return true
}

// pairs lists the entries of mapping n, expanding YAML merge keys ("<<"), whose
// entries are overridden by the mapping's own keys. Duplicate keys and
// non-scalar keys are errors. Every entry a merge brings in counts against
// the document's bound (spend), so nested merges of merges cannot fan out
// without limit.
func (d *decoder) pairs(n *yaml.Node, path string, depth int) []pair {
	if d.nodes >= d.maxNodes {
		return nil
	}
	var merged, own []pair
	seen := make(map[string]*yaml.Node)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			in := d.mergePairs(val, path, depth)
			if !d.spend(val, path, len(in)) {
				return nil
			}
			merged = append(merged, in...)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "mapping keys must be plain strings")
			continue
		}
		if prev, ok := seen[k.Value]; ok {
			d.errorf(k, path, "duplicate key %q (first defined at line %d)", k.Value, prev.Line)
			continue
		}
		seen[k.Value] = k
		own = append(own, pair{k, val})
	}
	out := make([]pair, 0, len(merged)+len(own))
	inMerged := make(map[string]bool)
	// Earlier merge sources win over later ones; own keys win over all.
	for _, p := range merged {
		if seen[p.key.Value] != nil || inMerged[p.key.Value] {
			continue
		}
		inMerged[p.key.Value] = true
		out = append(out, p)
	}
	return append(out, own...)
}

// mergePairs returns the entries a merge key's value brings in. Each
// call counts against the document's bound, and merges nested more than
// 20 deep stop the decoding (one error), so the work is bounded whatever
// the fan-out.
func (d *decoder) mergePairs(val *yaml.Node, path string, depth int) []pair {
	if !d.spend(val, path, 1) {
		return nil
	}
	if depth > 20 {
		d.fatal = true
		d.nodes = d.maxNodes
		d.errorf(val, path, "merge keys nested more than 20 deep")
		return nil
	}
	m := resolveAlias(val)
	switch m.Kind {
	case yaml.MappingNode:
		return d.pairs(m, path, depth+1)
	case yaml.SequenceNode:
		var out []pair
		for _, item := range m.Content {
			item = resolveAlias(item)
			if item.Kind != yaml.MappingNode {
				d.errorf(item, path, "a merge key (<<) takes a mapping or a list of mappings")
				continue
			}
			out = append(out, d.pairs(item, path, depth+1)...)
			if d.nodes >= d.maxNodes {
				return nil
			}
		}
		return out
	}
	d.errorf(val, path, "a merge key (<<) takes a mapping or a list of mappings")
	return nil
}

// fieldsOf maps the yaml names of t's fields to their indexes.
func (d *decoder) fieldsOf(t reflect.Type) map[string]int {
	if f, ok := d.fields[t]; ok {
		return f
	}
	f := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			f[name] = i
		}
	}
	d.fields[t] = f
	return f
}

// yamlName returns the yaml key of a struct field, or "" when it has none.
func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.valueErrorf(n, path, "expected a mapping (%s)", describe(n, false))
		return
	}
	fields := d.fieldsOf(v.Type())
	for _, p := range d.pairs(n, path, 0) {
		i, ok := fields[p.key.Value]
		if !ok {
			msg := fmt.Sprintf("unknown field %q", p.key.Value)
			if s := suggest(p.key.Value, fields); s != "" {
				msg += fmt.Sprintf("; did you mean %s?", s)
			}
			d.errorf(p.key, path, "%s", msg)
			continue
		}
		d.decode(p.value, v.Field(i), joinPath(path, p.key.Value))
	}
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.valueErrorf(n, path, "expected a list (%s)", describe(n, false))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
	}
	v.Set(s)
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.valueErrorf(n, path, "expected a mapping (%s)", describe(n, false))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	elemType := v.Type().Elem()
	for _, p := range d.pairs(n, path, 0) {
		key := reflect.ValueOf(p.key.Value).Convert(v.Type().Key())
		elem := reflect.New(elemType).Elem()
		if old := v.MapIndex(key); old.IsValid() {
			elem.Set(old)
		}
		d.decode(p.value, elem, joinPath(path, p.key.Value))
		v.SetMapIndex(key, elem)
	}
}

func (d *decoder) decodeScalar(n *yaml.Node, v reflect.Value, path string) {
	kindName := map[reflect.Kind]string{
		reflect.String: "a string", reflect.Bool: "a boolean (true or false)",
		reflect.Float32: "a number", reflect.Float64: "a number",
	}[v.Kind()]
	if kindName == "" {
		kindName = "an integer"
	}
	if n.Kind != yaml.ScalarNode {
		d.valueErrorf(n, path, "expected %s (%s)", kindName, describe(n, false))
		return
	}
	tag := n.ShortTag()
	switch v.Kind() {
	case reflect.String:
		v.SetString(n.Value)
	case reflect.Bool:
		var b bool
		if tag != "!!bool" || n.Decode(&b) != nil {
			d.valueErrorf(n, path, "expected %s (%s)", kindName, describe(n, false))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var i int64
		if tag != "!!int" {
			d.valueErrorf(n, path, "expected %s (%s)", kindName, describe(n, false))
			return
		}
		if err := n.Decode(&i); err != nil || v.OverflowInt(i) {
			d.valueErrorf(n, path, "integer out of range (%s)", describe(n, false))
			return
		}
		v.SetInt(i)
	case reflect.Float32, reflect.Float64:
		var f float64
		if (tag != "!!int" && tag != "!!float") || n.Decode(&f) != nil {
			d.valueErrorf(n, path, "expected %s (%s)", kindName, describe(n, false))
			return
		}
		v.SetFloat(f)
	default:
		d.valueErrorf(n, path, "unsupported field type %s", v.Type())
	}
}

func (d *decoder) decodeSecret(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.valueErrorf(n, path, "expected a string (%s)", describe(n, true))
		return
	}
	val, err := d.resolveSecret(n.Value)
	if err != nil {
		d.valueErrorf(n, path, "%v", err)
		return
	}
	v.SetString(val)
}

// resolveSecret turns a secret reference into its value: "env:NAME" reads an
// environment variable, "file:/path" reads a file (trailing newlines
// trimmed), anything else is the literal value. Errors name the variable or
// the path, never a value.
func (d *decoder) resolveSecret(raw string) (string, error) {
	switch {
	case strings.HasPrefix(raw, "env:"):
		name := strings.TrimPrefix(raw, "env:")
		if name == "" {
			return "", errors.New(`"env:" needs a variable name, e.g. env:OPENAI_API_KEY`)
		}
		val, ok := d.lookupEnv(name)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		if val == "" {
			return "", fmt.Errorf("environment variable %s is empty", name)
		}
		return val, nil
	case strings.HasPrefix(raw, "file:"):
		p := strings.TrimPrefix(raw, "file:")
		if p == "" {
			return "", errors.New(`"file:" needs a path, e.g. file:/run/secrets/openai`)
		}
		data, err := d.readFile(p)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is already in our message
			}
			return "", fmt.Errorf("cannot read secret file %s: %w", p, err)
		}
		val := strings.TrimRight(string(data), "\r\n")
		if val == "" {
			return "", fmt.Errorf("secret file %s is empty", p)
		}
		return val, nil
	}
	return raw, nil
}

// suggest returns the known name closest to got when it is a likely typo.
func suggest[V any](got string, known map[string]V) string {
	best, bestDist := "", -1
	for name := range known {
		dist := editDistance(got, name)
		if bestDist < 0 || dist < bestDist || (dist == bestDist && name < best) {
			best, bestDist = name, dist
		}
	}
	limit := max(1, len(got)/3)
	if bestDist < 0 || bestDist > limit {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and adjacent transpositions cost 1.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
