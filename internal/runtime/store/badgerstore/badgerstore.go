// Package badgerstore is the default engine.Store: an embedded Badger v4
// database in one directory. Put, CompareAndSet and Delete are durable
// (fsynced) before they return. PutUnsynced and DeleteUnsynced
// (engine.UnsyncedWriter), which the engine uses for self-healing state,
// hand the write to a write-behind queue and return: the queue coalesces
// repeated writes of a key, and the store's writer goroutine commits it to
// Badger's log in batches, usually within a fraction of a millisecond. Reads
// see a queued write at once. A durable write, a Scan and Close first commit
// every queued write, so a durable write also makes every earlier write
// durable. A crash or kill of the process may lose the writes still queued
// (the last few milliseconds of self-healing state, which heals by itself);
// once committed, a write survives a crash of the process, and only a power
// loss may drop it before the next sync.
//
// Values are stored in the envelope format (runtime/store/internal/envelope)
// so expiry is judged against the injected engine.Clock. Keys written with a
// TTL also carry a Badger expiry of ttl+GCGrace on the wall clock, only so
// that keys nobody reads again are eventually collected; visibility is always
// decided by the envelope.
package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/internal/envelope"
)

// GCGrace is how long past its envelope expiry a key may linger before
// Badger's own wall-clock TTL collects it.
const GCGrace = time.Minute

// maxCASAttempts bounds the retries of a CompareAndSet whose transaction
// keeps losing write conflicts. Every conflict means another writer
// committed, so the bound is only reached under pathological contention.
const maxCASAttempts = 10000

// errClosed is returned by every operation after Close.
var errClosed = errors.New("badgerstore: store is closed")

var (
	_ engine.Store          = (*Store)(nil)
	_ engine.UnsyncedWriter = (*Store)(nil)
)

// Store is an engine.Store on a Badger database. It is goroutine-safe;
// Close waits for in-flight operations.
type Store struct {
	db     *badger.DB
	dir    string
	clock  engine.Clock
	logger hclog.Logger
	unlock func() error

	mu     sync.RWMutex // read-held by operations, write-held by Close
	closed bool

	// wmu orders the writes around the syncs of the durable ones: an
	// unsynced write holds it shared, a durable write exclusively from its
	// commit through its sync. Badger syncs only the log of its current
	// memtable, so no other write may switch memtables (a full one is
	// swapped out before a write) between a durable write's commit and its
	// sync and leave it in a log the sync misses.
	wmu sync.RWMutex
	// syncs counts the durable writes' syncs, for the tests.
	syncs atomic.Uint64

	// q is the write-behind queue of the unsynced writes, committed by
	// the writer goroutine (writeBehind) until stop is closed; done is
	// closed when it has returned.
	q    queue
	stop chan struct{}
	done chan struct{}
}

// queued is one write of the write-behind queue: the encoded envelope and
// Badger's expiry (0: none), or a deletion.
type queued struct {
	raw       []byte
	expiresAt uint64
	deleted   bool
}

// queue is the write-behind queue: pending holds the latest write of each
// key not yet handed to Badger, inflight the batch being committed (reads
// still see it); commits are serialised by cmu, so batches reach Badger in
// the order they were taken.
type queue struct {
	mu       sync.Mutex
	pending  map[string]queued
	inflight map[string]queued
	spare    map[string]queued // the last committed batch, emptied, for reuse
	wake     chan struct{}     // capacity 1: a write is pending
	cmu      sync.Mutex
}

// add queues w for key, replacing any queued write of key, and wakes the
// writer goroutine.
func (q *queue) add(key string, w queued) {
	q.mu.Lock()
	q.pending[key] = w
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// lookup returns the queued write of key, if any.
func (q *queue) lookup(key string) (queued, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w, ok := q.pending[key]; ok {
		return w, true
	}
	w, ok := q.inflight[key]
	return w, ok
}

// Options returns the Badger options Open uses for dir, tuned for a small
// state set and a gateway that must stay within about 100 MB RSS:
//   - SyncWrites off: a committed write is in the memtable's log (a
//     memory-mapped file, so a crash of the process keeps it) when it
//     returns; the durable writes then sync the log themselves (DB.Sync);
//   - MemTableSize 8 MiB (default 64) and NumMemtables 2 (default 5);
//   - ValueLogFileSize 16 MiB (default 1 GiB); values below the default
//     ValueThreshold (1 MiB) stay in the LSM tree, so no value-log GC is
//     needed for state records;
//   - no compression and no block cache (default Snappy with a 256 MiB
//     cache): tables are read straight from their mmap, and compaction
//     needs no compression buffers; state is small, so disk use is not a
//     concern;
//   - NumCompactors 2 (default 4), NumGoroutines 2 (default 8);
//   - metrics off; Badger's log routed to logger, its info at debug and
//     its debug at trace.
func Options(dir string, logger hclog.Logger) badger.Options {
	return badger.DefaultOptions(dir).
		WithSyncWrites(false).
		WithLogger(badgerLogger{logger}).
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		WithValueLogFileSize(16 << 20).
		WithCompression(options.None).
		WithBlockCacheSize(0).
		WithNumCompactors(2).
		WithNumGoroutines(2).
		WithMetricsEnabled(false)
}

// Open opens (creating if needed) the Badger database in dir. If another
// process, or another Open in this process, holds dir, Open fails at once
// with an error wrapping engine.ErrStoreLocked that names dir. A nil logger
// discards Badger's output.
func Open(dir string, clock engine.Clock, logger hclog.Logger) (*Store, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("badgerstore: create %q: %w", dir, err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	db, err := badger.Open(Options(dir, logger))
	if err != nil {
		_ = unlock()
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("badgerstore: open %q: %w", dir, engine.ErrStoreLocked)
		}
		return nil, fmt.Errorf("badgerstore: open %q: %w", dir, err)
	}
	s := &Store{db: db, dir: dir, clock: clock, logger: logger, unlock: unlock,
		stop: make(chan struct{}), done: make(chan struct{})}
	s.q.pending, s.q.spare = map[string]queued{}, map[string]queued{}
	s.q.wake = make(chan struct{}, 1)
	go s.writeBehind()
	return s, nil
}

// writeBehind is the writer goroutine: it commits the queued writes
// whenever there are some, until Close.
func (s *Store) writeBehind() {
	defer close(s.done)
	for {
		select {
		case <-s.q.wake:
			if err := s.flush(); err != nil {
				s.logger.Error("self-healing state writes lost", "error", err)
			}
		case <-s.stop:
			return
		}
	}
}

// flush commits every queued write to Badger's log, in one transaction
// when they fit, and returns once they are there.
func (s *Store) flush() error {
	q := &s.q
	q.cmu.Lock()
	defer q.cmu.Unlock()
	q.mu.Lock()
	batch := q.pending
	if len(batch) == 0 {
		q.mu.Unlock()
		return nil
	}
	q.pending, q.inflight, q.spare = q.spare, batch, nil
	q.mu.Unlock()

	err := s.commit(batch)

	q.mu.Lock()
	q.inflight = nil
	clear(batch)
	q.spare = batch
	q.mu.Unlock()
	if err != nil {
		return fmt.Errorf("badgerstore: commit %d queued writes: %w", len(batch), err)
	}
	return nil
}

// commit writes batch to Badger's log without a sync, splitting it over
// several transactions when it is too big for one.
func (s *Store) commit(batch map[string]queued) error {
	s.wmu.RLock()
	defer s.wmu.RUnlock()
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for key, w := range batch {
		for {
			var err error
			if w.deleted {
				err = txn.Delete([]byte(key))
			} else {
				err = txn.SetEntry(&badger.Entry{Key: []byte(key), Value: w.raw, ExpiresAt: w.expiresAt})
			}
			if !errors.Is(err, badger.ErrTxnTooBig) {
				if err != nil {
					return err
				}
				break
			}
			if err := txn.Commit(); err != nil {
				return err
			}
			txn = s.db.NewTransaction(true)
		}
	}
	return txn.Commit()
}

// Get returns the live value of key and whether it exists. An expired key
// reads as absent and is deleted.
func (s *Store) Get(_ context.Context, key string) ([]byte, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, false, errClosed
	}
	if w, ok := s.q.lookup(key); ok {
		if w.deleted {
			return nil, false, nil
		}
		stamp, payload, err := envelope.Decode(w.raw)
		if err != nil {
			return nil, false, fmt.Errorf("badgerstore: get %q: %w", key, err)
		}
		if !envelope.Alive(stamp, s.clock.Now()) {
			// The queued write lands expired; a later read drops it.
			return nil, false, nil
		}
		return payload, true, nil
	}
	var raw []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(key))
		if err != nil {
			return err
		}
		raw, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("badgerstore: get %q: %w", key, err)
	}
	stamp, payload, err := envelope.Decode(raw)
	if err != nil {
		return nil, false, fmt.Errorf("badgerstore: get %q: %w", key, err)
	}
	if !envelope.Alive(stamp, s.clock.Now()) {
		s.dropExpired([]byte(key))
		return nil, false, nil
	}
	return payload, true, nil
}

// dropExpired deletes key if it is still expired. It is best effort: a
// conflict means someone else wrote the key, which is fine.
func (s *Store) dropExpired(key []byte) {
	err := s.update(false, func(txn *badger.Txn) (bool, error) {
		item, err := txn.Get(key)
		if err != nil {
			return false, err
		}
		var alive bool
		if err := item.Value(func(raw []byte) error {
			stamp, _, err := envelope.Decode(raw)
			alive = err != nil || envelope.Alive(stamp, s.clock.Now())
			return nil
		}); err != nil {
			return false, err
		}
		if alive {
			return false, nil
		}
		return true, txn.Delete(key)
	})
	if err != nil && !errors.Is(err, badger.ErrKeyNotFound) && s.logger.IsTrace() {
		s.logger.Trace("lazy delete of expired key skipped", "error", err)
	}
}

// Put durably sets key to value, expiring after ttl when ttl > 0.
func (s *Store) Put(_ context.Context, key string, value []byte, ttl time.Duration) error {
	return s.put(true, key, value, ttl)
}

// PutUnsynced is Put returning once the write is queued for Badger's log
// (engine.UnsyncedWriter; see the package documentation).
func (s *Store) PutUnsynced(_ context.Context, key string, value []byte, ttl time.Duration) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errClosed
	}
	e := s.entry(key, value, ttl)
	s.q.add(key, queued{raw: e.Value, expiresAt: e.ExpiresAt})
	return nil
}

func (s *Store) put(synced bool, key string, value []byte, ttl time.Duration) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errClosed
	}
	err := s.update(synced, func(txn *badger.Txn) (bool, error) {
		return true, txn.SetEntry(s.entry(key, value, ttl))
	})
	if err != nil {
		return fmt.Errorf("badgerstore: put %q: %w", key, err)
	}
	return nil
}

func (s *Store) entry(key string, value []byte, ttl time.Duration) *badger.Entry {
	e := badger.NewEntry([]byte(key), envelope.Encode(value, envelope.Expiry(s.clock.Now(), ttl)))
	if ttl > 0 {
		e = e.WithTTL(ttl + GCGrace)
	}
	return e
}

// update runs fn in a read-write transaction; fn reports whether it
// wrote. Synced, update first commits the queued writes (so fn sees them
// and the sync makes them durable too), then syncs Badger's logs after fn,
// so that the write is on stable storage when it returns, holding wmu
// exclusively from fn's commit through the sync (see Store); otherwise it
// holds wmu shared and returns once the write is in the log.
func (s *Store) update(synced bool, fn func(txn *badger.Txn) (wrote bool, err error)) error {
	if !synced {
		s.wmu.RLock()
		defer s.wmu.RUnlock()
		return s.db.Update(func(txn *badger.Txn) error {
			_, err := fn(txn)
			return err
		})
	}
	if err := s.flush(); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	wrote := false
	if err := s.db.Update(func(txn *badger.Txn) (err error) {
		wrote, err = fn(txn)
		return err
	}); err != nil || !wrote {
		return err
	}
	if err := s.db.Sync(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	s.syncs.Add(1)
	return nil
}

// CompareAndSet durably sets key to value only if its live value equals
// old; a nil old requires the key to be absent (or expired) and a nil value
// deletes it. It runs in a Badger transaction and retries on write
// conflicts, so concurrent callers see exactly one winner per value.
func (s *Store) CompareAndSet(ctx context.Context, key string, old, value []byte, ttl time.Duration) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return false, errClosed
	}
	k := []byte(key)
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("badgerstore: compare-and-set %q: %w", key, err)
		}
		swapped := false
		err := s.update(true, func(txn *badger.Txn) (bool, error) {
			swapped = false
			live, cur, err := s.current(txn, k)
			if err != nil {
				return false, err
			}
			if old == nil {
				if live {
					return false, nil
				}
			} else if !live || !bytes.Equal(cur, old) {
				return false, nil
			}
			if value == nil {
				err = txn.Delete(k)
			} else {
				err = txn.SetEntry(s.entry(key, value, ttl))
			}
			swapped = err == nil
			return swapped, err
		})
		if errors.Is(err, badger.ErrConflict) && attempt < maxCASAttempts {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("badgerstore: compare-and-set %q: %w", key, err)
		}
		return swapped, nil
	}
}

// current reads the live payload of k inside txn.
func (s *Store) current(txn *badger.Txn, k []byte) (live bool, payload []byte, err error) {
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, err
	}
	raw, err := item.ValueCopy(nil)
	if err != nil {
		return false, nil, err
	}
	stamp, payload, err := envelope.Decode(raw)
	if err != nil {
		return false, nil, err
	}
	return envelope.Alive(stamp, s.clock.Now()), payload, nil
}

// Delete durably removes key; deleting an absent key is not an error.
func (s *Store) Delete(_ context.Context, key string) error {
	return s.delete(true, key)
}

// DeleteUnsynced is Delete returning as PutUnsynced does.
func (s *Store) DeleteUnsynced(_ context.Context, key string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errClosed
	}
	s.q.add(key, queued{deleted: true})
	return nil
}

func (s *Store) delete(synced bool, key string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errClosed
	}
	if err := s.update(synced, func(txn *badger.Txn) (bool, error) {
		return true, txn.Delete([]byte(key))
	}); err != nil {
		return fmt.Errorf("badgerstore: delete %q: %w", key, err)
	}
	return nil
}

// Scan returns every live key with prefix, sorted by key, and deletes the
// expired ones it meets. It first commits the queued writes.
func (s *Store) Scan(_ context.Context, prefix string) ([]engine.KV, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, errClosed
	}
	if err := s.flush(); err != nil {
		return nil, fmt.Errorf("badgerstore: scan %q: %w", prefix, err)
	}
	var (
		out     []engine.KV
		expired [][]byte
	)
	now := s.clock.Now()
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte(prefix)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			raw, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			stamp, payload, err := envelope.Decode(raw)
			if err != nil {
				return fmt.Errorf("key %q: %w", item.Key(), err)
			}
			if !envelope.Alive(stamp, now) {
				expired = append(expired, item.KeyCopy(nil))
				continue
			}
			out = append(out, engine.KV{Key: string(item.Key()), Value: payload})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("badgerstore: scan %q: %w", prefix, err)
	}
	for _, k := range expired {
		s.dropExpired(k)
	}
	return out, nil
}

// Close commits the queued writes, flushes and closes the database and
// releases the directory. It is safe to call more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.stop)
	<-s.done
	err := s.flush()
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	if uerr := s.unlock(); err == nil && uerr != nil {
		err = uerr
	}
	if err != nil {
		return fmt.Errorf("badgerstore: close %q: %w", s.dir, err)
	}
	return nil
}

// badgerLogger routes Badger's log into hclog, one level quieter than
// Badger's own naming: its chatty info goes to debug, its debug to trace.
type badgerLogger struct{ l hclog.Logger }

func (b badgerLogger) Errorf(format string, args ...any) {
	b.l.Error(msg(format, args))
}

func (b badgerLogger) Warningf(format string, args ...any) {
	b.l.Warn(msg(format, args))
}

func (b badgerLogger) Infof(format string, args ...any) {
	if b.l.IsDebug() {
		b.l.Debug(msg(format, args))
	}
}

func (b badgerLogger) Debugf(format string, args ...any) {
	if b.l.IsTrace() {
		b.l.Trace(msg(format, args))
	}
}

func msg(format string, args []any) string {
	return strings.TrimSpace(fmt.Sprintf(format, args...))
}
