// Package console holds the operator console's browser tests: headless
// Chromium, driven through chromedp, against the real breakwater binary
// (built by the test) and the real `breakwater mock` upstream. It is its own
// Go module so that the gateway's module does not depend on chromedp.
//
//	go test ./...                                   # screenshots in a temporary directory (logged)
//	go test ./... -args -screenshots ../../docs/console   # refresh the documentation's screenshots
package console
