// Package dashboard serves Breakwater's web dashboard: one static page that
// reads the admin API with the operator's admin token (typed into the page
// and kept in the tab's session storage, never in the page itself) and
// shows breakers, cooling connections, terminal states and model lockouts.
package dashboard

import (
	_ "embed"
)

//go:embed index.html
var page []byte

// Page returns the dashboard HTML. It holds no secret and no state: every
// figure comes from the admin API at run time.
func Page() []byte { return page }
