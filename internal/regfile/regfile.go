// Package regfile reads files the operator names in the configuration
// (secrets, plugins, policies, the configuration itself) safely: only
// regular files, only up to a size limit, and without ever blocking on a
// named pipe or a device. `file:/dev/zero` as a secret or a FIFO as a
// plugin path then fail at once with a clear error instead of exhausting
// memory or hanging start-up.
package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular is the cause of reading a path that is not a regular file
// (a directory, a named pipe, a device, a socket).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is the cause of reading a file over the caller's limit.
var ErrTooLarge = errors.New("file too large")

// Read returns the content of the regular file at path (symbolic links
// followed) when it holds at most limit bytes. A path that is not a regular
// file fails with an error wrapping ErrNotRegular and naming what it is; a
// larger file with one wrapping ErrTooLarge. The file is checked before
// it is opened and again once open (opened non-blocking where the system
// allows, so a pipe swapped in between cannot block), and never more than
// limit+1 bytes are read. Errors do not repeat the path: callers name it.
func Read(path string, limit int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, unwrapPath(err)
	}
	if err := check(fi, limit); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, unwrapPath(err)
	}
	if err := check(fi, limit); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, unwrapPath(err)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(limit)
	}
	return data, nil
}

// check refuses what is not a regular file of at most limit bytes.
func check(fi fs.FileInfo, limit int64) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w (%s)", ErrNotRegular, describe(fi.Mode()))
	}
	if fi.Size() > limit {
		return tooLarge(limit)
	}
	return nil
}

func tooLarge(limit int64) error {
	return fmt.Errorf("%w: more than %s", ErrTooLarge, Size(limit))
}

// describe names a non-regular file mode.
func describe(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a plain file"
}

// unwrapPath drops the *fs.PathError wrapper, whose text repeats the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Size renders a byte count as the documentation writes limits: "64 KiB",
// "64 MiB", or bytes.
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
