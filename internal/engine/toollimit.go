package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// keyToolLimit prefixes a persisted tool limit: toollimit/<provider>/<model>.
const keyToolLimit = "toollimit/"

// ToolLimitInfo is the learned tool-count limit of one provider+model
// (docs/resilience.md §14), as persisted and shown by the admin API.
type ToolLimitInfo struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// Limit is the largest tool count believed to work.
	Limit int `json:"limit"`
	// Failing is the smallest tool count seen refused.
	Failing int `json:"failing"`
	// LearnedAt is when the limit last changed.
	LearnedAt time.Time `json:"learned_at"`
}

type modelKey struct{ provider, model string }

// toolLimits holds the learned limits and, per provider+model, the largest
// tool count that succeeded. It is goroutine-safe.
type toolLimits struct {
	mu     sync.RWMutex
	limits map[modelKey]*ToolLimitInfo
	maxOK  map[modelKey]int
}

func newToolLimits() *toolLimits {
	return &toolLimits{limits: make(map[modelKey]*ToolLimitInfo), maxOK: make(map[modelKey]int)}
}

// statedToolLimit patterns find the limit an upstream states in a
// too-many-tools error: OpenAI "array too long. Expected an array with
// maximum length 128", GitHub Copilot "You may not include more than 128
// tools", Gemini "At most 512 function declarations can be specified", and
// "maximum of 128 tools".
var statedToolLimit = []*regexp.Regexp{
	regexp.MustCompile(`(?i)'tools'[^.]*array too long\. expected an array with maximum length (\d+)`),
	regexp.MustCompile(`(?i)more than (\d+) tools`),
	regexp.MustCompile(`(?i)at most (\d+) function declarations`),
	regexp.MustCompile(`(?i)maximum of (\d+) (?:tools|functions|function declarations)`),
	regexp.MustCompile(`(?i)(?:tools|functions)[^.]{0,40}(?:at most|maximum(?: length)?(?: of)?) (\d+)`),
}

// parseToolLimitText returns the tool-count limit an upstream error text
// states, if any (see statedToolLimit). It is a pure function.
func parseToolLimitText(text string) (int, bool) {
	for _, re := range statedToolLimit {
		if m := re.FindStringSubmatch(text); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil && n > 0 {
				return n, true
			}
		}
	}
	return 0, false
}

// learn records a refusal of a request with tools tools, whose error said
// text, at now, and returns the entry. The limit is the one the text
// states when it is below the smallest refused count (the upstream knows
// best); else the largest count that succeeded below it; else that count
// − 1. Without a stated limit an existing entry only tightens.
func (t *toolLimits) learn(k modelKey, tools int, text string, now time.Time) ToolLimitInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.limits[k]
	if e == nil {
		e = &ToolLimitInfo{Provider: k.provider, Model: k.model, Limit: tools - 1, Failing: tools}
		t.limits[k] = e
	}
	e.Failing = min(e.Failing, tools)
	limit := e.Failing - 1
	if ok := t.maxOK[k]; ok > 0 && ok < e.Failing {
		limit = ok
	}
	if stated, found := parseToolLimitText(text); found && stated < e.Failing {
		e.Limit = stated
	} else {
		e.Limit = min(e.Limit, limit)
	}
	e.LearnedAt = now
	return *e
}

// succeeded records a success with tools tools and reports whether it
// raised a learned limit (a success above it: the upstream accepts more
// than was learned).
func (t *toolLimits) succeeded(k modelKey, tools int, now time.Time) bool {
	t.mu.RLock()
	e := t.limits[k]
	best := t.maxOK[k]
	t.mu.RUnlock()
	if tools <= best && (e == nil || tools <= e.Limit) {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if tools > t.maxOK[k] {
		t.maxOK[k] = tools
	}
	e = t.limits[k]
	if e == nil || tools <= e.Limit {
		return false
	}
	e.Limit = tools
	if e.Failing <= tools {
		e.Failing = tools + 1
	}
	e.LearnedAt = now
	return true
}

// ToolLimit returns the learned tool-count limit of provider+model: a
// request declaring more tools than it routes to other targets first (the
// planner's query). It takes a read lock and allocates nothing.
func (e *Engine) ToolLimit(provider, model string) (int, bool) {
	e.tools.mu.RLock()
	defer e.tools.mu.RUnlock()
	if l := e.tools.limits[modelKey{provider, model}]; l != nil {
		return l.Limit, true
	}
	return 0, false
}

// RecordToolsSucceeded records that a request declaring tools tools
// succeeded on provider+model; the limit learned from a later refusal is
// the largest such count below the refused one. A success above a learned
// limit raises it. Cheap when nothing changes (a read lock).
func (e *Engine) RecordToolsSucceeded(provider, model string, tools int) {
	if tools <= 0 {
		return
	}
	k := modelKey{provider, model}
	if e.tools.succeeded(k, tools, e.clock.Now()) {
		if err := e.persistToolLimit(context.Background(), k); err != nil {
			e.log.Error("persisting a tool limit failed", "provider", provider, "model", model, "error", err)
		}
	}
}

// learnToolLimit handles a tool_limit failure: with the request's tool
// count known (Outcome.Tools) it learns the model's limit and persists it.
func (e *Engine) learnToolLimit(ctx context.Context, o Outcome) error {
	if o.Reason != ReasonToolLimit || o.Tools <= 0 || o.Model == "" {
		return nil
	}
	k := modelKey{o.Provider, o.Model}
	info := e.tools.learn(k, o.Tools, o.Message, e.clock.Now())
	e.log.Info("learned a tool limit", "provider", o.Provider, "model", o.Model, "limit", info.Limit, "failing", info.Failing)
	return e.persistToolLimit(ctx, k)
}

// ToolLimits lists every learned tool limit, sorted by provider and model.
func (e *Engine) ToolLimits() []ToolLimitInfo {
	e.tools.mu.RLock()
	out := make([]ToolLimitInfo, 0, len(e.tools.limits))
	for _, l := range e.tools.limits {
		out = append(out, *l)
	}
	e.tools.mu.RUnlock()
	slices.SortFunc(out, func(a, b ToolLimitInfo) int {
		return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Model, b.Model))
	})
	return out
}

// ClearToolLimit forgets the learned limit of provider+model and reports
// whether there was one.
func (e *Engine) ClearToolLimit(ctx context.Context, provider, model string) (bool, error) {
	if provider == "" || model == "" {
		return false, fmt.Errorf("%w: provider and model are required", ErrInvalidRequest)
	}
	k := modelKey{provider, model}
	e.tools.mu.Lock()
	_, ok := e.tools.limits[k]
	delete(e.tools.limits, k)
	delete(e.tools.maxOK, k)
	e.tools.mu.Unlock()
	if !ok {
		return false, nil
	}
	return true, e.persistToolLimit(ctx, k)
}

// persistToolLimit writes k's current entry, or deletes its key when it
// has none.
func (e *Engine) persistToolLimit(ctx context.Context, k modelKey) error {
	key := keyToolLimit + url.PathEscape(k.provider) + "/" + url.PathEscape(k.model)
	return e.persist(ctx, key, durable, func() ([]byte, time.Duration, bool, error) {
		e.tools.mu.RLock()
		cur := e.tools.limits[k]
		var v []byte
		var err error
		if cur != nil {
			v, err = json.Marshal(cur)
		}
		e.tools.mu.RUnlock()
		return v, 0, cur != nil, err
	})
}

// loadToolLimits restores the persisted tool limits.
func (e *Engine) loadToolLimits(ctx context.Context) error {
	kvs, err := e.store.Scan(ctx, keyToolLimit)
	if err != nil {
		return fmt.Errorf("engine: load %s*: %w", keyToolLimit, err)
	}
	for _, kv := range kvs {
		var l ToolLimitInfo
		err := json.Unmarshal(kv.Value, &l)
		if err == nil && (l.Provider == "" || l.Model == "" || l.Limit < 0 || !strings.HasPrefix(kv.Key, keyToolLimit)) {
			err = errors.New("tool limit entry without provider, model or limit")
		}
		if err != nil {
			e.log.Warn("skipping unreadable state entry", "key", kv.Key, "error", err)
			continue
		}
		e.tools.limits[modelKey{l.Provider, l.Model}] = &l
	}
	return nil
}
