// Package dashboard holds Breakwater's operator console: a single-page
// application of plain JavaScript modules, CSS and one HTML page, embedded
// in the binary (no CDN, no build step, works offline). The page holds no
// secret and no state: the operator types the admin token into its login
// form (kept in the tab's session storage) and every figure comes from the
// admin API at run time.
package dashboard

import (
	"embed"
	"mime"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// Page returns the console's HTML page.
func Page() []byte {
	b, _ := assets.ReadFile("assets/index.html")
	return b
}

// Asset returns the embedded file name (a script, a stylesheet or an
// icon) and its content type; ok is false for any other name.
func Asset(name string) (body []byte, contentType string, ok bool) {
	if name == "" || strings.Contains(name, "/") || strings.HasPrefix(name, ".") || name == "index.html" {
		return nil, "", false
	}
	b, err := assets.ReadFile("assets/" + name)
	if err != nil {
		return nil, "", false
	}
	ct := mime.TypeByExtension(path.Ext(name))
	switch path.Ext(name) {
	case ".js":
		ct = "text/javascript; charset=utf-8"
	case ".css":
		ct = "text/css; charset=utf-8"
	case ".svg":
		ct = "image/svg+xml"
	}
	if ct == "" {
		return nil, "", false
	}
	return b, ct, true
}
