package badgerstore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/internal/envelope"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/storetest"
)

// failFast is how quickly an Open of a held directory must give up.
const failFast = 2 * time.Second

func open(t testing.TB, dir string, clock engine.Clock) *Store {
	t.Helper()
	s, err := Open(dir, clock, nil)
	if err != nil {
		t.Fatalf("Open(%q): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock *clocktest.Clock) engine.Store {
		return open(t, t.TempDir(), clock)
	})
}

func TestPersistence(t *testing.T) {
	base := t.TempDir()
	storetest.RunPersistence(t, func(t *testing.T, clock *clocktest.Clock, name string) engine.Store {
		return open(t, filepath.Join(base, name), clock)
	})
}

func TestSecondOpenInProcessFailsFast(t *testing.T) {
	dir := t.TempDir()
	first := open(t, dir, engine.SystemClock{})

	start := time.Now()
	s, err := Open(dir, engine.SystemClock{}, nil)
	if err == nil {
		_ = s.Close()
		t.Fatal("second Open of a held directory succeeded")
	}
	assertLocked(t, err, dir, time.Since(start))

	// Releasing the first store frees the directory.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	open(t, dir, engine.SystemClock{})
}

// holdDirEnv makes TestHelperHoldLock act as the other process.
const holdDirEnv = "BREAKWATER_TEST_HOLD_BADGER_DIR"

func TestOpenHeldByAnotherProcessFailsFast(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLock$")
	cmd.Env = append(os.Environ(), holdDirEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("helper process: %q, %v", line, err)
	}

	start := time.Now()
	s, err := Open(dir, engine.SystemClock{}, nil)
	if err == nil {
		_ = s.Close()
		t.Fatal("Open of a directory held by another process succeeded")
	}
	assertLocked(t, err, dir, time.Since(start))

	_ = stdin.Close() // the helper closes its store and exits
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper process: %v", err)
	}
	open(t, dir, engine.SystemClock{})
}

// TestHelperHoldLock is the other process of
// TestOpenHeldByAnotherProcessFailsFast: it opens the directory, says
// "locked", and holds it until its stdin closes.
func TestHelperHoldLock(t *testing.T) {
	s := helperStore(t, holdDirEnv)
	os.Stdout.WriteString("locked\n")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func assertLocked(t *testing.T, err error, dir string, took time.Duration) {
	t.Helper()
	if !errors.Is(err, engine.ErrStoreLocked) {
		t.Fatalf("err = %v, want engine.ErrStoreLocked", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Fatalf("err = %q does not name the directory %q", err, dir)
	}
	if took > failFast {
		t.Fatalf("Open took %v to fail, want under %v", took, failFast)
	}
}

func TestBadgerLogRouting(t *testing.T) {
	tests := []struct {
		level      hclog.Level
		wantBadger bool
	}{
		{hclog.Info, false}, // Badger's info chatter is debug for us
		{hclog.Debug, true},
	}
	for _, tt := range tests {
		t.Run(tt.level.String(), func(t *testing.T) {
			var buf bytes.Buffer
			logger := hclog.New(&hclog.LoggerOptions{Name: "bw", Level: tt.level, Output: &buf})
			s, err := Open(t.TempDir(), engine.SystemClock{}, logger)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			if got := strings.Contains(out, "[DEBUG] bw: "); got != tt.wantBadger {
				t.Fatalf("at %s, Badger lines present = %v, want %v; log:\n%s", tt.level, got, tt.wantBadger, out)
			}
			if strings.Contains(out, "[INFO]") {
				t.Fatalf("Badger logged at info:\n%s", out)
			}
		})
	}
}

func TestOpenErrorsNameDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(file, engine.SystemClock{}, nil)
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("Open(file) err = %v, want an error naming %q", err, file)
	}
	if errors.Is(err, engine.ErrStoreLocked) {
		t.Fatalf("Open(file) err = %v, must not claim a lock", err)
	}
}

func BenchmarkGet(b *testing.B) {
	storetest.BenchmarkGet(b, open(b, b.TempDir(), engine.SystemClock{}))
}

func BenchmarkPut(b *testing.B) {
	storetest.BenchmarkPut(b, open(b, b.TempDir(), engine.SystemClock{}))
}

// TestDurableWritesAreSynced checks which writes wait for Badger's sync:
// Put, a CompareAndSet that swaps and Delete each sync once (leases,
// settings and terminal states go through them); a CompareAndSet that
// does not swap, PutUnsynced and DeleteUnsynced do not.
func TestDurableWritesAreSynced(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir(), engine.SystemClock{})
	step := func(what string, wantSyncs uint64, op func() error) {
		t.Helper()
		before := s.syncs.Load()
		if err := op(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := s.syncs.Load() - before; got != wantSyncs {
			t.Errorf("%s: %d syncs, want %d", what, got, wantSyncs)
		}
	}
	step("Put", 1, func() error { return s.Put(ctx, "settings", []byte("v1"), 0) })
	step("CompareAndSet that swaps", 1, func() error {
		ok, err := s.CompareAndSet(ctx, "lease/owner/x", nil, []byte("g1"), time.Minute)
		if err == nil && !ok {
			err = errors.New("did not swap")
		}
		return err
	})
	step("CompareAndSet that does not swap", 0, func() error {
		ok, err := s.CompareAndSet(ctx, "lease/owner/x", []byte("other"), []byte("g2"), time.Minute)
		if err == nil && ok {
			err = errors.New("swapped")
		}
		return err
	})
	step("Delete", 1, func() error { return s.Delete(ctx, "settings") })
	step("PutUnsynced", 0, func() error { return s.PutUnsynced(ctx, "cooldown/p/c", []byte("cool"), time.Hour) })
	step("DeleteUnsynced", 0, func() error { return s.DeleteUnsynced(ctx, "cooldown/p/c") })
	if _, ok, _ := s.Get(ctx, "cooldown/p/c"); ok {
		t.Error("DeleteUnsynced left the key")
	}
}

// killDirEnv makes TestHelperWriteUnsyncedAndWait act as the process that
// is killed.
const killDirEnv = "BREAKWATER_TEST_KILL_BADGER_DIR"

// TestUnsyncedWritesSurviveKill: a process writes with PutUnsynced and
// DeleteUnsynced, waits for the write-behind queue to commit them, says
// so, and is killed with SIGKILL before it closes the store; reopened, the
// store holds every committed write (the writes still queued at a kill are
// the ones it may lose, see the package documentation).
func TestUnsyncedWritesSurviveKill(t *testing.T) {
	dir := t.TempDir()
	{
		s := open(t, dir, engine.SystemClock{})
		if err := s.Put(t.Context(), "lockout/p/c/m", []byte("locked"), 0); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriteUnsyncedAndWait$")
	cmd.Env = append(os.Environ(), killDirEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "written" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper process: %q, %v", line, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	_ = cmd.Wait()

	s := open(t, dir, engine.SystemClock{})
	for i := range 100 {
		key := fmt.Sprintf("cooldown/p/c%d", i)
		got, ok, err := s.Get(t.Context(), key)
		if err != nil || !ok || string(got) != "cooling" {
			t.Fatalf("%s after kill -9: %q, %v, %v; want \"cooling\"", key, got, ok, err)
		}
	}
	if _, ok, err := s.Get(t.Context(), "lockout/p/c/m"); err != nil || ok {
		t.Errorf("key deleted with DeleteUnsynced is back after kill -9 (%v)", err)
	}
}

// TestHelperWriteUnsyncedAndWait is the process TestUnsyncedWritesSurviveKill
// kills: it writes 100 keys with PutUnsynced, deletes one with
// DeleteUnsynced, waits for the queue to be committed to Badger's log,
// says "written" and waits.
func TestHelperWriteUnsyncedAndWait(t *testing.T) {
	s := helperStore(t, killDirEnv)
	for i := range 100 {
		if err := s.PutUnsynced(t.Context(), fmt.Sprintf("cooldown/p/c%d", i), []byte("cooling"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteUnsynced(t.Context(), "lockout/p/c/m"); err != nil {
		t.Fatal(err)
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("written\n")
	select {} // until killed
}

// helperStore opens the store of a helper process in the directory the
// environment variable env names; without it the test is skipped.
func helperStore(t *testing.T, env string) *Store {
	t.Helper()
	dir := os.Getenv(env)
	if dir == "" {
		t.Skip("helper process only")
	}
	s, err := Open(dir, engine.SystemClock{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// inLog reads key straight from Badger, past the write-behind queue.
func inLog(t *testing.T, s *Store, key string) (string, bool) {
	t.Helper()
	var v []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(key))
		if err != nil {
			return err
		}
		raw, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		_, v, err = envelope.Decode(raw)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatalf("reading %s from Badger: %v", key, err)
	}
	return string(v), true
}

// TestQueuedWritesAreReadAtOnce: while the writer goroutine cannot commit
// (its commit lock held), PutUnsynced and DeleteUnsynced are not in
// Badger yet, but Get already answers with them; Scan commits them first.
func TestQueuedWritesAreReadAtOnce(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir(), engine.SystemClock{})
	if err := s.Put(ctx, "cooldown/p/old", []byte("old"), 0); err != nil {
		t.Fatal(err)
	}
	s.q.cmu.Lock()
	if err := s.PutUnsynced(ctx, "cooldown/p/new", []byte("cooling"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUnsynced(ctx, "cooldown/p/old"); err != nil {
		t.Fatal(err)
	}
	if _, ok := inLog(t, s, "cooldown/p/new"); ok {
		t.Error("PutUnsynced committed while the commit lock was held")
	}
	if v, ok := inLog(t, s, "cooldown/p/old"); !ok || v != "old" {
		t.Errorf("DeleteUnsynced committed while the commit lock was held (%q, %v)", v, ok)
	}
	if got, ok, err := s.Get(ctx, "cooldown/p/new"); err != nil || !ok || string(got) != "cooling" {
		t.Errorf("Get of a queued write: %q, %v, %v; want \"cooling\"", got, ok, err)
	}
	if got, ok, err := s.Get(ctx, "cooldown/p/old"); err != nil || ok {
		t.Errorf("Get of a queued deletion: %q, %v, %v; want absent", got, ok, err)
	}
	s.q.cmu.Unlock()
	kvs, err := s.Scan(ctx, "cooldown/")
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != 1 || kvs[0].Key != "cooldown/p/new" || string(kvs[0].Value) != "cooling" {
		t.Errorf("Scan after the queue: %v; want only cooldown/p/new", kvs)
	}
	if _, ok := inLog(t, s, "cooldown/p/old"); ok {
		t.Error("the queued deletion was not committed by Scan")
	}
}

// TestQueuedWritesCoalesce: 100 writes of one key while a commit is in
// progress leave one queued write, the last, which is what Badger gets.
func TestQueuedWritesCoalesce(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir(), engine.SystemClock{})
	s.q.cmu.Lock()
	for i := range 100 {
		if err := s.PutUnsynced(ctx, "breaker/p", []byte(fmt.Sprintf("v%d", i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	s.q.mu.Lock()
	n := len(s.q.pending)
	s.q.mu.Unlock()
	s.q.cmu.Unlock()
	if n != 1 {
		t.Errorf("%d queued writes after 100 writes of one key, want 1", n)
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if v, ok := inLog(t, s, "breaker/p"); !ok || v != "v99" {
		t.Errorf("Badger holds %q (%v), want the last write v99", v, ok)
	}
}

// TestDurableWriteCommitsQueuedWrites: when a durable write returns, every
// unsynced write queued before it is in Badger (and was synced with it),
// and a CompareAndSet judges the queued value, not the one in Badger.
func TestDurableWriteCommitsQueuedWrites(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir(), engine.SystemClock{})
	for i := range 50 {
		if err := s.PutUnsynced(ctx, fmt.Sprintf("cooldown/p/c%d", i), []byte("cooling"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutUnsynced(ctx, "lockout/p/c/m", []byte("queued"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "settings", []byte("v1"), 0); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		key := fmt.Sprintf("cooldown/p/c%d", i)
		if v, ok := inLog(t, s, key); !ok || v != "cooling" {
			t.Fatalf("%s not in Badger after a later durable write (%q, %v)", key, v, ok)
		}
	}
	if err := s.PutUnsynced(ctx, "lockout/p/c/m", []byte("newer"), 0); err != nil {
		t.Fatal(err)
	}
	ok, err := s.CompareAndSet(ctx, "lockout/p/c/m", []byte("newer"), []byte("swapped"), 0)
	if err != nil || !ok {
		t.Fatalf("CompareAndSet against the queued value: %v, %v; want a swap", ok, err)
	}
	if got, _, _ := s.Get(ctx, "lockout/p/c/m"); string(got) != "swapped" {
		t.Errorf("after the swap: %q, want \"swapped\"", got)
	}
}

// TestCloseCommitsQueuedWrites: Close commits the queued writes; the
// reopened store holds them.
func TestCloseCommitsQueuedWrites(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, engine.SystemClock{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := s.PutUnsynced(t.Context(), fmt.Sprintf("cooldown/p/c%d", i), []byte("cooling"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.PutUnsynced(t.Context(), "cooldown/p/late", []byte("x"), 0); !errors.Is(err, errClosed) {
		t.Errorf("PutUnsynced after Close: %v, want the closed error", err)
	}
	s = open(t, dir, engine.SystemClock{})
	kvs, err := s.Scan(t.Context(), "cooldown/")
	if err != nil || len(kvs) != 100 {
		t.Fatalf("after Close and reopen: %d keys, %v; want 100", len(kvs), err)
	}
}
