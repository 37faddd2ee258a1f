package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// receiveRetry is the pause between two failed reads of the change
// channel (Redis down: go-redis reconnects on the next read).
const receiveRetry = 100 * time.Millisecond

// Watch delivers the changes other instances make (engine.SharedStore).
//
// Notices arrive by pub/sub; bursts on one key are coalesced into one
// ChangeKey. Pub/sub delivers at most once, so every CheckInterval Watch
// also reads each group's version counter: a version that neither a
// notice nor one of this Store's own writes accounted for within one
// interval means a notice was missed, and Watch delivers ChangeResync
// (as it does right after subscribing, after the subscription was
// re-established, and when Redis comes back after ChangeDown/ChangeUp).
// When fn fails on a ChangeKey or ChangeResync, ChangeResync is delivered
// again at the next check. fn runs on Watch's goroutine. Only one Watch
// may run per Store; it returns nil when ctx ends.
func (s *Store) Watch(ctx context.Context, fn func(engine.Change) error) error {
	w := &watcher{s: s, fn: fn, nudge: make(chan struct{}, 1), subscribed: make(chan struct{}, 1),
		queue: keyQueue{ready: make(chan struct{}, 1), at: make(map[string]time.Time)}}
	s.health.setOnChange(func() {
		select {
		case w.nudge <- struct{}{}:
		default:
		}
	})
	defer s.health.setOnChange(nil)
	return w.run(ctx)
}

// watcher is one running Watch.
type watcher struct {
	s          *Store
	fn         func(engine.Change) error
	nudge      chan struct{} // the health changed
	subscribed chan struct{} // a (re)subscription was confirmed
	queue      keyQueue
	pending    bool // a resync is owed
}

func (w *watcher) run(ctx context.Context) error {
	up := true
	sub := w.subscribe(ctx)
	defer func() { sub.close() }()
	tick := time.NewTicker(w.s.check)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.subscribed:
			w.resync(ctx, nil)
		case <-w.queue.ready:
			for _, c := range w.queue.take() {
				if err := w.fn(c); err != nil {
					w.s.logger.Warn("applying a change of another instance failed; resynchronising", "key", c.Key, "error", err)
					w.pending = true
				}
			}
		case <-w.nudge:
			st := w.s.health.status()
			if st.Up == up {
				continue
			}
			up = st.Up
			if !up {
				_ = w.fn(engine.Change{Kind: engine.ChangeDown, Err: errors.New(st.LastError)})
				continue
			}
			_ = w.fn(engine.Change{Kind: engine.ChangeUp})
			// A fresh subscription: the old connection may be dead without
			// knowing it. Its confirmation triggers the resync.
			sub.close()
			sub = w.subscribe(ctx)
		case <-tick.C:
			if w.pending {
				w.resync(ctx, nil)
				continue
			}
			counters, err := w.counters(ctx)
			if err != nil {
				continue // the health tracker logs and reports it
			}
			if w.s.vers.gap(counters) {
				w.s.logger.Warn("a change notice was missed; resynchronising")
				w.resync(ctx, counters)
			}
		}
	}
}

// resync delivers ChangeResync and then accounts for every version up to
// counters (read now when nil), which the reload covered.
func (w *watcher) resync(ctx context.Context, counters map[string]uint64) {
	if counters == nil {
		var err error
		if counters, err = w.counters(ctx); err != nil {
			w.pending = true
			return
		}
	}
	if err := w.fn(engine.Change{Kind: engine.ChangeResync}); err != nil {
		w.s.logger.Warn("resynchronising the local view failed; retrying", "error", err)
		w.pending = true
		return
	}
	w.pending = false
	w.s.vers.settle(counters)
}

// counters reads every group's version counter.
func (w *watcher) counters(ctx context.Context) (map[string]uint64, error) {
	s := w.s
	var groups []string
	err := s.do(ctx, func(ctx context.Context) (err error) {
		groups, err = s.client.SMembers(ctx, s.keys.registry()).Result()
		return err
	})
	if err != nil {
		return nil, err
	}
	groups = s.vers.union(groups)
	out := make(map[string]uint64, len(groups))
	if len(groups) == 0 {
		return out, nil
	}
	cmds := make([]*redis.StringCmd, len(groups))
	err = s.do(ctx, func(ctx context.Context) error {
		pipe := s.client.Pipeline()
		for i, g := range groups {
			cmds[i] = pipe.Get(ctx, s.keys.version(g))
		}
		_, err := pipe.Exec(ctx)
		if errors.Is(err, redis.Nil) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	for i, g := range groups {
		n, err := cmds[i].Uint64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		out[g] = n
	}
	return out, nil
}

// subscription is the set of pub/sub connections of one subscribe.
type subscription struct {
	pss  []*redis.PubSub
	done sync.WaitGroup
}

// close ends every connection and waits for their readers.
func (sub *subscription) close() {
	for _, ps := range sub.pss {
		_ = ps.Close()
	}
	sub.done.Wait()
}

// subscribe subscribes to the change channel, with a reader per
// connection. In a Cluster it subscribes on every master: a notice is
// published on the master of its key's slot and relayed to the other
// nodes by the cluster bus, which adds tens of milliseconds now and then;
// read on its own node it arrives in well under one. The copies are
// recognised by their version and delivered once.
func (w *watcher) subscribe(ctx context.Context) *subscription {
	sub := &subscription{}
	start := func(ps *redis.PubSub) {
		sub.pss = append(sub.pss, ps)
		sub.done.Add(1)
		go func() {
			defer sub.done.Done()
			w.receive(ps)
		}()
	}
	if cc, ok := w.s.client.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		var masters []*redis.Client
		err := w.s.do(ctx, func(ctx context.Context) error {
			return cc.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error {
				mu.Lock()
				masters = append(masters, n)
				mu.Unlock()
				return nil
			})
		})
		if err == nil {
			for _, n := range masters {
				start(n.Subscribe(context.Background(), w.s.keys.channel()))
			}
			return sub
		}
	}
	start(w.s.client.Subscribe(context.Background(), w.s.keys.channel()))
	return sub
}

// receive reads ps until it is closed.
func (w *watcher) receive(ps *redis.PubSub) {
	for {
		msg, err := ps.Receive(context.Background())
		if err != nil {
			if errors.Is(err, redis.ErrClosed) || strings.Contains(err.Error(), "closed") {
				return
			}
			time.Sleep(receiveRetry)
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				select {
				case w.subscribed <- struct{}{}:
				default:
				}
			}
		case *redis.Message:
			w.notice(m.Payload)
		}
	}
}

// notice accounts for one change notice and queues its key unless this
// Store wrote it.
func (w *watcher) notice(payload string) {
	f := strings.SplitN(payload, " ", 5)
	if len(f) != 5 {
		return
	}
	v, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil {
		return
	}
	if !w.s.vers.see(f[1], v) || f[0] == w.s.origin {
		return // a copy already delivered, or this Store's own write
	}
	var sent time.Time
	if ns, err := strconv.ParseInt(f[3], 10, 64); err == nil {
		sent = time.Unix(0, ns)
	}
	w.queue.push(f[4], sent)
}

// keyQueue coalesces the keys of pending notices, in arrival order.
type keyQueue struct {
	mu    sync.Mutex
	order []string
	at    map[string]time.Time // earliest sent time per queued key
	ready chan struct{}
}

func (q *keyQueue) push(key string, sent time.Time) {
	q.mu.Lock()
	if _, ok := q.at[key]; !ok {
		q.order = append(q.order, key)
		q.at[key] = sent
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *keyQueue) take() []engine.Change {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]engine.Change, len(q.order))
	for i, k := range q.order {
		out[i] = engine.Change{Kind: engine.ChangeKey, Key: k, SentAt: q.at[k]}
	}
	q.order = q.order[:0]
	clear(q.at)
	return out
}

// versions accounts, per group, for the version numbers this Store has
// seen: its own writes and every notice. It is goroutine-safe.
type versions struct {
	mu sync.Mutex
	g  map[string]*groupVersions
}

// groupVersions: every version up to applied is accounted for; seen holds
// the ones above it; prev is the counter read at the previous check.
type groupVersions struct {
	applied, prev uint64
	seen          map[uint64]struct{}
}

func newVersions() *versions { return &versions{g: make(map[string]*groupVersions)} }

func (v *versions) group(g string) *groupVersions {
	gv := v.g[g]
	if gv == nil {
		gv = &groupVersions{seen: make(map[uint64]struct{})}
		v.g[g] = gv
	}
	return gv
}

// see accounts for version n of group g and reports whether it was new.
func (v *versions) see(g string, n uint64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	gv := v.group(g)
	if _, dup := gv.seen[n]; dup || n <= gv.applied {
		return false
	}
	gv.seen[n] = struct{}{}
	gv.advance()
	return true
}

// advance moves applied over the contiguous seen versions.
func (gv *groupVersions) advance() {
	for {
		if _, ok := gv.seen[gv.applied+1]; !ok {
			return
		}
		delete(gv.seen, gv.applied+1)
		gv.applied++
	}
}

// union returns groups plus every group this Store knows of.
func (v *versions) union(groups []string) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	set := make(map[string]bool, len(groups)+len(v.g))
	for _, g := range groups {
		set[g] = true
	}
	for g := range v.g {
		if !set[g] {
			groups = append(groups, g)
		}
	}
	return groups
}

// gap compares the counters read now with the versions seen and reports
// whether one was missed: a version already counted at the previous check
// and still unaccounted, or a counter that went back (Redis lost its data).
func (v *versions) gap(counters map[string]uint64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	missed := false
	for g, c := range counters {
		gv := v.group(g)
		if c < gv.applied || gv.applied < min(gv.prev, c) {
			missed = true
		}
		gv.prev = c
	}
	return missed
}

// settle accounts for every version up to counters (a resync covered
// them).
func (v *versions) settle(counters map[string]uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for g, c := range counters {
		gv := v.group(g)
		gv.applied, gv.prev = c, c
		for n := range gv.seen {
			if n <= c {
				delete(gv.seen, n)
			}
		}
		gv.advance()
	}
}
