//go:build unix

package badgerstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// lockFileName is the file in the data directory that Breakwater holds an
// exclusive advisory lock on while the store is open.
const lockFileName = "breakwater.lock"

// lockDir takes a non-blocking exclusive flock on dir's lock file. Locks are
// per open file, so a second Open in the same process conflicts too. The
// returned func releases the lock.
func lockDir(dir string) (func() error, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("badgerstore: open lock file in %q: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("badgerstore: open %q: %w", dir, engine.ErrStoreLocked)
		}
		return nil, fmt.Errorf("badgerstore: lock %q: %w", dir, err)
	}
	return f.Close, nil
}
