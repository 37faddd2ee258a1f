package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse decodes arbitrary documents: the result is a configuration
// or a *ValidationError whose every entry says something, never a panic;
// the node bound keeps aliases and merge keys from fanning out.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"server: {listen: \"127.0.0.1:1\", admin_token: sekrit-admin-token}\n",
		"a: &a [x, x]\nb: &b [*a, *a]\nserver: {listen: *b}\n",
		"x0: &x0 {listen: \"127.0.0.1:1\"}\nx1: &x1 {<<: [*x0, *x0]}\nserver: {<<: [*x1, *x1]}\n",
		"keys:\n  - {id: k, key: \"env:NOPE\"}\n",
		"keys:\n  - {id: k, key: \"file:/dev/zero\"}\n",
		"providers:\n  - {id: p, kind: openai, base_url: \"https://x\", models: [m], connections: [{id: c, api_key: sk-fuzz-secret}]}\n",
		"---\n---\n", "{", "[1, 2", "server: !!binary aGk=\n",
	} {
		f.Add([]byte(s))
	}
	opts := Options{
		LookupEnv: func(string) (string, bool) { return "", false },
		ReadFile:  func(string) ([]byte, error) { return nil, errors.New("no files in the fuzz test") },
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseWithOptions(data, "fuzz.yaml", opts)
		if err == nil {
			if c == nil {
				t.Fatal("nil config without an error")
			}
			return
		}
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Errors) == 0 {
			t.Fatalf("not a ValidationError: %v", err)
		}
		for _, fe := range ve.Errors {
			if fe.Message == "" {
				t.Fatalf("an empty error message: %+v", fe)
			}
		}
	})
}
