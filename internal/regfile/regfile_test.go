package regfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("sk-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(ok, 64); err != nil || string(b) != "sk-secret\n" {
		t.Fatalf("regular file: %q %v", b, err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(ok, link); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(link, 64); err != nil || string(b) != "sk-secret\n" {
		t.Fatalf("link to a regular file: %q %v", b, err)
	}
	if _, err := Read(ok, 5); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 5 bytes") {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := Read(dir, 64); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "a directory") {
		t.Fatalf("directory: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), 64); !errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), dir) {
		t.Fatalf("missing: %v", err)
	}
}

// TestDevicesAndPipesFailFast replays issue 19 item 9: file:/dev/zero ran
// the gateway out of memory, and a FIFO blocked start-up.
func TestDevicesAndPipesFailFast(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for path, want := range map[string]string{"/dev/zero": "a character device", fifo: "a named pipe"} {
		done := make(chan error, 1)
		go func() { _, err := Read(path, 64<<10); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: %v", path, err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: still reading after 2 s", path)
		}
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{64 << 10: "64 KiB", 64 << 20: "64 MiB", 100: "100 bytes", 1500: "1500 bytes"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
