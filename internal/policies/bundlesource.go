package policies

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
)

// Bundle polling defaults (BundleOptions).
const (
	DefaultBundlePollInterval = 30 * time.Second
	MinBundlePollInterval     = time.Second
	DefaultBundleMaxBytes     = 32 << 20
	DefaultBundleAlgorithm    = "RS256"
	// bundleTimeout bounds one bundle download.
	bundleTimeout = 30 * time.Second
	// firstPollTimeout bounds the poll New makes before serving.
	firstPollTimeout = 10 * time.Second
	// bundleKeyID names the configured key when BundleOptions.KeyID is
	// empty, so that it verifies whatever key id a signature names.
	bundleKeyID = "breakwater-bundle-key"
	// bundlePrefix names a bundle's files in module keys and errors.
	bundlePrefix = "bundle/"
)

// BundleOptions pull the operator policies from an OPA bundle server
// (Options.Bundle): the bundle at URL is polled every PollInterval with
// If-None-Match (its last ETag), its .manifest revision read, its
// signature verified with PublicKey, and its .rego files loaded as the
// operator policies, with the rules of Options.Dir (which is then not
// read). A bundle that cannot be read, is unsigned or badly signed while
// a signature is required, claims roots outside breakwater/operator,
// carries data or WebAssembly files, or fails the checks Reload makes, is
// rejected: the previous revision keeps serving.
type BundleOptions struct {
	// URL is the bundle's address, e.g. https://bundles.example.com/breakwater/bundle.tar.gz.
	URL string
	// PollInterval is the time between two polls (default
	// DefaultBundlePollInterval, at least MinBundlePollInterval).
	PollInterval time.Duration
	// PublicKey verifies the bundle's signature: a PEM public key or
	// certificate for the RS*, PS* and ES* algorithms, the shared secret
	// for HS*. Empty: signatures are not verified.
	PublicKey string
	// KeyID is the key id the signature must name; empty accepts any.
	KeyID string
	// Algorithm is the signing algorithm (default DefaultBundleAlgorithm).
	Algorithm string
	// SigningRequired rejects unsigned bundles; it needs PublicKey.
	SigningRequired bool
	// Headers are sent with every poll (e.g. Authorization).
	Headers map[string]string
	// MaxBytes bounds the downloaded bundle and each file in it (default
	// DefaultBundleMaxBytes).
	MaxBytes int64
	// Client fetches the bundle; nil means a client with a 30 s timeout.
	Client *http.Client
}

// BundleStatus describes the bundle source for GET /api/policies.
type BundleStatus struct {
	// URL is the bundle's address, without query or user information.
	URL string `json:"url"`
	// Revision, ETag and Files describe the serving bundle: its manifest
	// revision, the ETag it was served with and its .rego files. Signed
	// reports that its signature was verified.
	Revision string   `json:"revision,omitempty"`
	ETag     string   `json:"etag,omitempty"`
	Files    []string `json:"files,omitempty"`
	Signed   bool     `json:"signed"`
	// LastPoll is when the server was last asked; LastActivated when the
	// serving bundle was loaded.
	LastPoll      time.Time `json:"last_poll,omitzero"`
	LastActivated time.Time `json:"last_activated,omitzero"`
	// LastError is why the last poll failed or the last bundle fetched was
	// rejected; "" when the last poll served or confirmed a good bundle.
	LastError string `json:"last_error,omitempty"`
	// Polls counts requests to the server; NotModified its 304 answers;
	// Rejected the bundles refused.
	Polls       uint64 `json:"polls"`
	NotModified uint64 `json:"not_modified"`
	Rejected    uint64 `json:"rejected"`
}

// bundleSource is the pipeline's bundle poller state.
type bundleSource struct {
	opts   BundleOptions
	target string
	verify *bundle.VerificationConfig // nil: signatures are not verified
	client *http.Client
	log    hclog.Logger

	mu     sync.Mutex // serialises polls
	etag   string     // ETag of the last bundle processed, accepted or not; guarded by mu
	logged string     // the last rejection logged; guarded by mu

	polls, notModified, rejected atomic.Uint64

	statusMu sync.Mutex
	st       BundleStatus // guarded by statusMu
}

func newBundleSource(o *BundleOptions, log hclog.Logger) *bundleSource {
	b := &bundleSource{opts: *o, target: o.URL, client: o.Client, log: log.Named("bundle")}
	if b.opts.PollInterval <= 0 {
		b.opts.PollInterval = DefaultBundlePollInterval
	}
	b.opts.PollInterval = max(b.opts.PollInterval, MinBundlePollInterval)
	if b.opts.MaxBytes <= 0 {
		b.opts.MaxBytes = DefaultBundleMaxBytes
	}
	if b.opts.Algorithm == "" {
		b.opts.Algorithm = DefaultBundleAlgorithm
	}
	if b.client == nil {
		b.client = &http.Client{Timeout: bundleTimeout}
	}
	if u, err := url.Parse(o.URL); err == nil {
		u.RawQuery, u.User = "", nil
		b.target = u.String()
	}
	if o.PublicKey != "" {
		id := o.KeyID
		if id == "" {
			id = bundleKeyID
		}
		keys := map[string]*bundle.KeyConfig{id: {Key: o.PublicKey, Algorithm: b.opts.Algorithm}}
		b.verify = bundle.NewVerificationConfig(keys, id, "", nil)
		if !o.SigningRequired {
			b.verify = b.verify.WithOptionalSignature()
		}
	} else {
		b.log.Warn("bundle signatures are not verified: no public key is configured", "url", b.target)
	}
	b.st.URL = b.target
	return b
}

// status returns the bundle source's status.
func (b *bundleSource) status() *BundleStatus {
	b.statusMu.Lock()
	st := b.st
	b.statusMu.Unlock()
	st.Files = append([]string(nil), st.Files...)
	st.Polls, st.NotModified, st.Rejected = b.polls.Load(), b.notModified.Load(), b.rejected.Load()
	return &st
}

// firstBundlePoll polls the bundle server once before the pipeline
// serves, bounded by firstPollTimeout; a failure is logged and the
// built-in policies serve until a poll succeeds. It warns when the
// operator directory holds policies, which bundle mode ignores.
func (p *Pipeline) firstBundlePoll(ctx context.Context) {
	if srcs, err := readPolicyDir(p.dir); err == nil && len(srcs) > 0 {
		p.log.Warn("the operator policy directory is ignored: operator policies come from the bundle server",
			"dir", p.dir, "files", len(srcs), "url", p.bundle.target)
	}
	ctx, cancel := context.WithTimeout(ctx, firstPollTimeout)
	defer cancel()
	_ = p.pollBundle(ctx) // recorded and logged by pollBundle
}

// errNotModified reports a 304 answer.
var errNotModified = errors.New("not modified")

// pollBundle asks the bundle server for a new bundle (If-None-Match the
// last ETag) and activates it when it is valid (see BundleOptions). It
// returns nil when the server had nothing new or the new bundle serves,
// else the reason, which Status also reports; a rejected bundle is logged
// once, however often it is fetched again.
func (p *Pipeline) pollBundle(ctx context.Context) error {
	b := p.bundle
	b.mu.Lock()
	defer b.mu.Unlock()
	b.polls.Add(1)
	now := p.clock.Now()
	bnd, etag, err := b.fetch(ctx)
	switch {
	case errors.Is(err, errNotModified):
		b.notModified.Add(1)
		b.setStatus(func(st *BundleStatus) { st.LastPoll = now })
		return nil
	case err == nil:
		err = p.activateBundle(ctx, &bnd, etag, now)
	}
	if etag != "" {
		b.etag = etag
	}
	if err != nil {
		if bnd.Manifest.Revision != "" || etag != "" {
			b.rejected.Add(1)
		}
		b.setStatus(func(st *BundleStatus) { st.LastPoll, st.LastError = now, err.Error() })
		key := etag + "|" + bnd.Manifest.Revision + "|" + err.Error()
		if key != b.logged {
			b.logged = key
			b.log.Error("bundle rejected; the previous revision keeps serving (logged once per bundle)",
				"url", b.target, "etag", etag, "bundle_revision", bnd.Manifest.Revision,
				"serving", p.state.Load().revision, "error", err)
		}
		return err
	}
	b.logged = ""
	return nil
}

// fetch downloads and reads the bundle unless the server answers 304
// (errNotModified). It returns the bundle's ETag whenever the server sent
// one, even with an error reading the bundle.
func (b *bundleSource) fetch(ctx context.Context) (bundle.Bundle, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.opts.URL, nil)
	if err != nil {
		return bundle.Bundle{}, "", fmt.Errorf("bundle request: %w", err)
	}
	for k, v := range b.opts.Headers {
		req.Header.Set(k, v)
	}
	if b.etag != "" {
		req.Header.Set("If-None-Match", b.etag)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return bundle.Bundle{}, "", fmt.Errorf("bundle download from %s: %w", b.target, redactURLError(err))
	}
	defer resp.Body.Close()
	etag := resp.Header.Get("ETag")
	switch resp.StatusCode {
	case http.StatusNotModified:
		return bundle.Bundle{}, "", errNotModified
	case http.StatusOK:
	default:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return bundle.Bundle{}, "", fmt.Errorf("bundle download from %s: %s", b.target, resp.Status)
	}
	body := io.LimitReader(resp.Body, b.opts.MaxBytes+1)
	r := bundle.NewCustomReader(bundle.NewTarballLoaderWithBaseURL(body, "")).
		WithRegoVersion(ast.RegoV1).
		WithSizeLimitBytes(b.opts.MaxBytes).
		WithBundleEtag(etag).
		WithLazyLoadingMode(false)
	if b.verify != nil {
		r = r.WithBundleVerificationConfig(b.verify)
	} else {
		r = r.WithSkipBundleVerification(true)
	}
	bnd, err := r.Read()
	if err != nil {
		return bnd, etag, fmt.Errorf("bundle read: %w", err)
	}
	return bnd, etag, nil
}

// checkBundle refuses what the pipeline cannot serve from bnd: roots
// other than breakwater/operator (and its _test package) or below them,
// data documents, WebAssembly and plan files, and an unsigned bundle when
// a signature is required (OPA's reader checks that too).
func (b *bundleSource) checkBundle(bnd *bundle.Bundle) error {
	if bnd.Manifest.Roots == nil || len(*bnd.Manifest.Roots) == 0 {
		return errors.New(`bundle manifest declares no roots: set "roots": ["breakwater/operator"]`)
	}
	for _, r := range *bnd.Manifest.Roots {
		if !operatorRootPath(strings.Trim(r, "/")) {
			return fmt.Errorf("bundle root %q is outside breakwater/operator", r)
		}
	}
	if len(bnd.Data) > 0 {
		return errors.New("bundle carries data documents; write operator data as Rego constants")
	}
	if len(bnd.WasmModules) > 0 || len(bnd.PlanModules) > 0 {
		return errors.New("bundle carries WebAssembly or plan files; only .rego files are served")
	}
	if b.verify.SignatureRequired() && len(bnd.Signatures.Signatures) == 0 {
		return errors.New("bundle is not signed")
	}
	return nil
}

// operatorRootPath reports whether bundle root r (slash-separated) is the
// operator package, its test package, or below one of them.
func operatorRootPath(r string) bool {
	for _, root := range [...]string{"breakwater/operator", "breakwater/operator_test"} {
		if r == root || strings.HasPrefix(r, root+"/") {
			return true
		}
	}
	return false
}

// activateBundle validates bnd's policies as Reload validates a directory
// and, when they pass, makes them the serving operator policies.
func (p *Pipeline) activateBundle(ctx context.Context, bnd *bundle.Bundle, etag string, now time.Time) error {
	b := p.bundle
	if err := b.checkBundle(bnd); err != nil {
		return err
	}
	srcs := make([]source, 0, len(bnd.Modules))
	for _, m := range bnd.Modules {
		srcs = append(srcs, source{name: bundlePrefix + strings.TrimPrefix(path.Clean("/"+m.Path), "/"), text: string(m.Raw)})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	q, files, err := p.buildOperator(ctx, srcs)
	if err != nil {
		var msgs []string
		for _, f := range files {
			if f.Error != "" {
				msgs = append(msgs, f.Error)
			}
		}
		if len(msgs) > 0 {
			return fmt.Errorf("bundle policies: %s", strings.Join(msgs, "; "))
		}
		return fmt.Errorf("bundle policies: %w", err)
	}
	rev := bnd.Manifest.Revision
	if rev == "" {
		rev = "sha-" + hashSources(srcs)[:12]
	}
	next := *p.state.Load()
	next.queries, next.warned, next.bundleRevision = q, new(atomic.Bool), bnd.Manifest.Revision
	next.builtinOnly = len(srcs) == 0
	next.goCatalogue = next.builtinOnly && p.goCatalogue
	next.revision = p.builtin.revision + "+bundle." + rev
	next.opFiles = next.opFiles[:0:0]
	for _, f := range files {
		next.opFiles = append(next.opFiles, f.Name)
	}
	p.state.Store(&next)
	// A directory load attempted later compares against this set.
	p.lastHash = ""
	b.setStatus(func(st *BundleStatus) {
		st.Revision, st.ETag, st.Files, st.Signed = bnd.Manifest.Revision, etag, next.opFiles, len(bnd.Signatures.Signatures) > 0 && b.verify != nil
		st.LastPoll, st.LastActivated, st.LastError = now, now, ""
	})
	p.log.Info("operator bundle activated", "revision", next.revision, "etag", etag, "files", len(files), "url", b.target)
	return nil
}

func (b *bundleSource) setStatus(f func(*BundleStatus)) {
	b.statusMu.Lock()
	f(&b.st)
	b.statusMu.Unlock()
}

// pollBundles polls the bundle server every poll interval until ctx is
// done.
func (p *Pipeline) pollBundles(ctx context.Context) error {
	t := time.NewTicker(p.bundle.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			_ = p.pollBundle(ctx) // recorded and logged by pollBundle
			if p.reloaded != nil {
				select {
				case p.reloaded <- struct{}{}:
				case <-ctx.Done():
				}
			}
		}
	}
}

// sourceStatus completes s with the bundle source and the decision log;
// OperatorFiles is never nil (a bundle's files are in Bundle).
func (p *Pipeline) sourceStatus(s *Status) {
	if s.OperatorFiles == nil {
		s.OperatorFiles = []FileStatus{}
	}
	if p.bundle != nil {
		s.Source, s.OperatorDir, s.Bundle = "bundle", "", p.bundle.status()
	}
	if p.dlog != nil {
		s.DecisionLog = p.dlog.status()
	}
}
