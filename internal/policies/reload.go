package policies

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/open-policy-agent/opa/v1/ast"
)

// Watch timings.
const (
	// watchPoll is how often Watch re-checks the directory's file sizes
	// and modification times, catching what fsnotify cannot see (a
	// directory created after start, files in subdirectories).
	watchPoll = time.Second
	// watchSettle lets a burst of file events (an editor's save, a copy of
	// several files) settle before reloading.
	watchSettle = 100 * time.Millisecond
)

// FileStatus is one operator policy file as the last load attempt saw it.
type FileStatus struct {
	// Name is the file's path relative to the operator directory.
	Name string `json:"name"`
	// Loaded reports whether the file is part of the serving revision.
	Loaded bool `json:"loaded"`
	// Error is the parse, compile or test error located in this file.
	Error string `json:"error,omitempty"`
}

// Status describes the policy pipeline for GET /api/policies.
type Status struct {
	// Revision is the serving revision (see Pipeline.Revision).
	Revision        string   `json:"revision"`
	BuiltinRevision string   `json:"builtin_revision"`
	BuiltinFiles    []string `json:"builtin_files"`
	OperatorDir     string   `json:"operator_dir,omitempty"`
	// OperatorFiles are the files of the last load attempt.
	OperatorFiles []FileStatus `json:"operator_files"`
	OperatorRules int          `json:"operator_rules"`
	// LastReload is when the serving operator file set was loaded.
	LastReload time.Time `json:"last_reload,omitzero"`
	// LastError is why the last load attempt was rejected, "" when it
	// succeeded.
	LastError string `json:"last_error,omitempty"`
	// EvalErrors counts evaluations that failed and fell back to the
	// built-in policies.
	EvalErrors uint64 `json:"eval_errors"`
	// EvalTimeouts counts evaluations cancelled by their deadline
	// (Options.EvalTimeout) that fell back to the built-in policies.
	EvalTimeouts uint64 `json:"eval_timeouts"`
	// InvalidDecisions counts Rego decisions ignored as invalid.
	InvalidDecisions uint64 `json:"invalid_decisions"`
	// PluginAnswersIgnored counts plugin answers ignored as invalid.
	PluginAnswersIgnored uint64 `json:"plugin_answers_ignored"`
	// Source is where the operator policies come from: "dir" or "bundle".
	Source string `json:"source"`
	// Bundle describes the bundle server (Source "bundle").
	Bundle *BundleStatus `json:"bundle,omitempty"`
	// DecisionLog describes the decision log, when there is one.
	DecisionLog *DecisionLogStatus `json:"decision_log,omitempty"`
}

// Status reports the pipeline's revision, files, rules and last reload.
// It is goroutine-safe.
func (p *Pipeline) Status() Status {
	st := p.state.Load()
	p.statusMu.RLock()
	a := p.attempt
	p.statusMu.RUnlock()
	s := Status{
		Revision:             st.revision,
		BuiltinRevision:      p.builtin.revision,
		BuiltinFiles:         p.builtin.files(),
		OperatorDir:          p.dir,
		OperatorFiles:        slices.Clone(a.files),
		OperatorRules:        len(st.rules),
		LastReload:           a.lastReload,
		LastError:            a.lastError,
		EvalErrors:           p.evalErrors.Load(),
		EvalTimeouts:         p.evalTimeouts.Load(),
		InvalidDecisions:     p.invalidDecisions.Load(),
		PluginAnswersIgnored: p.pluginIgnored.Load(),
		Source:               "dir",
	}
	p.sourceStatus(&s)
	return s
}

// Reload reads the operator directory and, when its files changed since
// the last attempt, validates the new set: every file must parse as Rego
// v1, declare package OperatorPackage (or below it, or its _test package),
// compile with the built-in bundle and pass its own _test.rego tests. A
// valid set becomes the serving revision at once; an invalid one is
// rejected, logged and reported by Status, and the previous revision keeps
// serving. Reload returns the rejection (or the unchanged previous one).
// It is goroutine-safe; concurrent calls run one at a time.
//
// When the operator policies come from a bundle server (Options.Bundle),
// Reload polls it instead (see BundleOptions).
func (p *Pipeline) Reload(ctx context.Context) error {
	if p.bundle != nil {
		return p.pollBundle(ctx)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	srcs, err := readPolicyDir(p.dir)
	if err != nil {
		p.recordAttempt(nil, err)
		return err
	}
	hash := hashSources(srcs)
	if hash == p.lastHash {
		return p.lastErr
	}
	p.lastHash = hash
	q, files, err := p.buildOperator(ctx, srcs)
	p.lastErr = err
	if err != nil {
		p.recordAttempt(files, err)
		p.log.Error("operator policies rejected; the previous revision keeps serving",
			"dir", p.dir, "revision", p.state.Load().revision, "error", err)
		return err
	}
	next := *p.state.Load()
	next.queries, next.opFiles, next.warned, next.slow = q, nil, new(atomic.Bool), new(atomic.Bool)
	next.builtinOnly = len(srcs) == 0
	next.goCatalogue = next.builtinOnly && p.goCatalogue
	next.revision = p.builtin.revision
	if len(srcs) > 0 {
		next.revision += "+operator." + hash[:12]
	}
	for i := range files {
		files[i].Loaded = true
		next.opFiles = append(next.opFiles, files[i].Name)
	}
	p.state.Store(&next)
	p.statusMu.Lock()
	p.attempt = reloadAttempt{files: files, lastReload: p.clock.Now()}
	p.statusMu.Unlock()
	p.log.Info("policies loaded", "revision", next.revision, "operator_files", len(files))
	return nil
}

// recordAttempt notes a rejected load attempt for Status.
func (p *Pipeline) recordAttempt(files []FileStatus, err error) {
	p.statusMu.Lock()
	defer p.statusMu.Unlock()
	serving := p.state.Load().opFiles
	for i := range files {
		files[i].Loaded = slices.Contains(serving, files[i].Name) && files[i].Error == ""
	}
	p.attempt.files = files
	p.attempt.lastError = err.Error()
}

// buildOperator validates operator file set srcs and prepares the queries
// of the built-in bundle plus srcs. It returns the files' statuses (errors
// attributed to their files) and the rejection, if any.
func (p *Pipeline) buildOperator(ctx context.Context, srcs []source) (queries, []FileStatus, error) {
	files := make([]FileStatus, len(srcs))
	for i, s := range srcs {
		files[i].Name = s.name
	}
	if len(srcs) == 0 {
		return p.fallback, files, nil
	}
	fe := fileErrors{files: files}
	all, err := parseOperator(srcs, &fe)
	if err != nil {
		return queries{}, files, err
	}
	serving := p.builtin.policyModules(false)
	withTests := p.builtin.policyModules(false)
	for _, s := range srcs {
		withTests[s.name] = all[s.name]
		if !s.isTest() {
			serving[s.name] = all[s.name]
		}
	}
	q, err := prepareQueries(ctx, serving)
	if err != nil {
		fe.attribute(err)
		return queries{}, files, fmt.Errorf("operator policies: %w", err)
	}
	results, err := runRegoTests(ctx, withTests)
	if err != nil {
		fe.attribute(err)
		return queries{}, files, fmt.Errorf("operator policy tests: %w", err)
	}
	var failed []string
	for _, r := range results {
		if r.Pass || r.Skip || !isOperatorFile(r.File, srcs) {
			continue
		}
		msg := fmt.Sprintf("%s.%s failed", r.Package, r.Name)
		if r.Error != "" {
			msg = fmt.Sprintf("%s.%s: %s", r.Package, r.Name, r.Error)
		}
		fe.add(r.File, msg)
		failed = append(failed, r.File+": "+msg)
	}
	if len(failed) > 0 {
		return queries{}, files, fmt.Errorf("operator policy tests failed: %s", strings.Join(failed, "; "))
	}
	return q, files, nil
}

// parseOperator parses operator sources and checks their packages.
func parseOperator(srcs []source, fe *fileErrors) (map[string]*ast.Module, error) {
	out := make(map[string]*ast.Module, len(srcs))
	var errs []string
	for _, s := range srcs {
		m, err := parseModule(s)
		if err != nil {
			fe.add(s.name, err.Error())
			errs = append(errs, err.Error())
			continue
		}
		if !inOperatorPackage(m.Package.Path) {
			msg := fmt.Sprintf("%s: package %s is outside %s", s.name,
				strings.TrimPrefix(m.Package.Path.String(), "data."), OperatorPackage)
			fe.add(s.name, msg)
			errs = append(errs, msg)
			continue
		}
		out[s.name] = m
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("operator policies: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

func isOperatorFile(name string, srcs []source) bool {
	return slices.ContainsFunc(srcs, func(s source) bool { return s.name == name })
}

// fileErrors attributes errors to the files they are located in.
type fileErrors struct {
	files []FileStatus
}

func (fe *fileErrors) add(name, msg string) {
	for i := range fe.files {
		if fe.files[i].Name == name {
			if fe.files[i].Error != "" {
				fe.files[i].Error += "; "
			}
			fe.files[i].Error += msg
			return
		}
	}
}

// attribute spreads an ast.Errors over the files its errors point at.
func (fe *fileErrors) attribute(err error) {
	var errs ast.Errors
	if !errors.As(err, &errs) {
		return
	}
	for _, e := range errs {
		if e.Location != nil {
			fe.add(e.Location.File, e.Error())
		}
	}
}

// Watch reloads the operator directory whenever its files change, until
// ctx is done; it returns nil then. Changes are seen through fsnotify
// (settled for watchSettle) and, as a fallback, by comparing the files'
// sizes and modification times every watchPoll (a directory created after
// start, subdirectories, a platform without fsnotify). Rejected file sets
// are logged and reported by Status. Watch also runs the pipeline's other
// background work until ctx is done: with Options.Bundle it polls the
// bundle server instead of watching the directory, and with
// Options.DecisionLog it ships decisions to the log's file and service
// (flushing them when ctx ends, before it returns). With none of
// Options.Dir, Bundle and DecisionLog it returns at once. Run it in its
// own goroutine, once.
func (p *Pipeline) Watch(ctx context.Context) error {
	if p.dlog != nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.dlog.runSinks(ctx)
		}()
		defer func() { <-done }()
	}
	switch {
	case p.bundle != nil:
		return p.pollBundles(ctx)
	case p.dir == "" && p.dlog != nil:
		<-ctx.Done()
		return nil
	case p.dir == "":
		return nil
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		p.log.Warn("fsnotify unavailable; polling the operator policy directory", "error", err)
	} else {
		defer w.Close()
	}
	var events <-chan fsnotify.Event
	var werrs <-chan error
	watching := false
	watch := func() {
		if w == nil || watching {
			return
		}
		if err := w.Add(p.dir); err == nil {
			watching, events, werrs = true, w.Events, w.Errors
		}
	}
	watch()
	poll := time.NewTicker(watchPoll)
	defer poll.Stop()
	settle := time.NewTimer(watchSettle)
	settle.Stop()
	var sig string
	reload := func() {
		sig = dirSignature(p.dir)
		_ = p.Reload(ctx) // logged and reported by Reload
		if p.reloaded != nil {
			p.reloaded <- struct{}{}
		}
	}
	// Catch up with changes made since the last Reload, before this
	// watcher could see them.
	reload()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events, werrs, watching = nil, nil, false
				continue
			}
			if ev.Name == filepath.Clean(p.dir) && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
				watching = false
				_ = w.Remove(p.dir)
			}
			settle.Reset(watchSettle)
		case err, ok := <-werrs:
			if ok {
				p.log.Warn("watching the operator policy directory", "dir", p.dir, "error", err)
			}
		case <-settle.C:
			reload()
		case <-poll.C:
			watch()
			if s := dirSignature(p.dir); s != sig {
				reload()
			}
		}
	}
}

// dirSignature summarises the .rego files under dir by name, size and
// modification time, cheaply (no reads).
func dirSignature(dir string) string {
	var b strings.Builder
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(path, ".rego") {
			return nil
		}
		info, err := os.Stat(path) // follows links, as readPolicyDir does
		if err != nil {
			return nil
		}
		fmt.Fprintf(&b, "%s|%d|%d\n", path, info.Size(), info.ModTime().UnixNano())
		return nil
	})
	return b.String()
}
