//go:build !unix

package badgerstore

// lockDir is a no-op where flock is unavailable; Badger's own directory
// lock still refuses a second opener and Open maps its error to
// engine.ErrStoreLocked.
func lockDir(string) (func() error, error) {
	return func() error { return nil }, nil
}
