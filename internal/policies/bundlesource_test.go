package policies

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// signingKey is an ES256 key pair in PEM.
type signingKey struct {
	private, public string
}

func newSigningKey(t testing.TB) signingKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{
		private: string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})),
		public:  string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})),
	}
}

// bundleSpec describes a bundle to build with OPA's bundle package.
type bundleSpec struct {
	revision string
	roots    []string          // nil: ["breakwater/operator", "breakwater/operator_test"]
	files    map[string]string // path → Rego
	data     map[string]any
	key      *signingKey // nil: unsigned
	keyID    string
	// tamper, when set, changes the named file after signing.
	tamper string
}

// build returns the bundle as the .tar.gz a bundle server serves.
func (s bundleSpec) build(t testing.TB) []byte {
	t.Helper()
	roots := s.roots
	if roots == nil {
		roots = []string{"breakwater/operator", "breakwater/operator_test"}
	}
	b := bundle.Bundle{Manifest: bundle.Manifest{Revision: s.revision, Roots: &roots}, Data: s.data}
	if b.Data == nil {
		b.Data = map[string]any{}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range s.files {
			if !yield(k) {
				return
			}
		}
	}) {
		b.Modules = append(b.Modules, bundle.ModuleFile{URL: "/" + name, Path: "/" + name, Raw: []byte(s.files[name])})
	}
	if s.key != nil {
		sc := bundle.NewSigningConfig(s.key.private, "ES256", "")
		if err := b.GenerateSignature(sc, s.keyID, false); err != nil {
			t.Fatal(err)
		}
	}
	if s.tamper != "" {
		for i := range b.Modules {
			if b.Modules[i].URL == "/"+s.tamper {
				b.Modules[i].Raw = append(b.Modules[i].Raw, []byte("\n# tampered\n")...)
			}
		}
	}
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// bundleServer serves one bundle file with an ETag (its digest) and
// answers If-None-Match with 304, as a bundle service or a static file
// server does.
type bundleServer struct {
	mu        sync.Mutex
	body      []byte
	noETag    bool
	status    int // when not 0, every answer
	full, not atomic.Uint64
	auth      atomic.Value
	srv       *httptest.Server
}

func newBundleServer(t testing.TB, body []byte) *bundleServer {
	s := &bundleServer{body: body}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.auth.Store(r.Header.Get("Authorization"))
		s.mu.Lock()
		body, noETag, status := s.body, s.noETag, s.status
		s.mu.Unlock()
		if status != 0 {
			http.Error(w, "unavailable", status)
			return
		}
		sum := sha256.Sum256(body)
		etag := `"` + hex.EncodeToString(sum[:8]) + `"`
		if !noETag {
			if r.Header.Get("If-None-Match") == etag {
				s.not.Add(1)
				w.WriteHeader(http.StatusNotModified)
				return
			}
			w.Header().Set("ETag", etag)
		}
		s.full.Add(1)
		w.Header().Set("Content-Type", "application/gzip")
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *bundleServer) serve(body []byte) {
	s.mu.Lock()
	s.body = body
	s.mu.Unlock()
}

// acmeBundleFiles are acmeV1 and its test as bundle files.
func acmeBundleFiles() map[string]string {
	return map[string]string{"breakwater/operator/acme.rego": acmeV1, "breakwater/operator/acme_test.rego": acmeV1Test}
}

// acmeV2Files restate acme's 503 to 429 (acmeV2).
func acmeV2Files() map[string]string {
	return map[string]string{"breakwater/operator/acme.rego": acmeV2}
}

// newBundleFixture returns a pipeline polling url, verifying with key
// (nil: none), and its log (hclog serialises the writes; read it only
// while no Watch runs).
func newBundleFixture(t testing.TB, url string, key *signingKey, mod func(*BundleOptions)) (*fixture, *bytes.Buffer) {
	t.Helper()
	logs := &bytes.Buffer{}
	o := &BundleOptions{URL: url, Headers: map[string]string{"Authorization": "Bearer bundle-token"}}
	if key != nil {
		o.PublicKey, o.Algorithm, o.SigningRequired = key.public, "ES256", true
	}
	if mod != nil {
		mod(o)
	}
	return newFixture(t, Options{Bundle: o, Dir: t.TempDir(),
		Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})}), logs
}

func TestBundlePollPicksUpNewRevision(t *testing.T) {
	key := newSigningKey(t)
	srv := newBundleServer(t, bundleSpec{revision: "rev-1", files: acmeBundleFiles(), key: &key}.build(t))
	f, _ := newBundleFixture(t, srv.srv.URL+"/bundles/breakwater.tar.gz", &key, nil)

	// New polled once and serves rev-1.
	if rev := f.p.Revision(); !strings.HasSuffix(rev, "+bundle.rev-1") {
		t.Fatalf("revision %q", rev)
	}
	if o := f.p.Classify(acmeFailure()); o.RuleID != "acme.capacity" || o.RuleSource != SourceOperator || o.CooldownHint != 30*time.Second {
		t.Errorf("rev-1 outcome %+v", o)
	}
	st := f.p.Status()
	b := st.Bundle
	if st.Source != "bundle" || st.OperatorDir != "" || st.OperatorFiles == nil || b == nil || b.Revision != "rev-1" || b.ETag == "" || !b.Signed ||
		b.LastError != "" || b.LastPoll.IsZero() || !b.LastActivated.Equal(epoch) || b.Polls != 1 ||
		!slices.Equal(b.Files, []string{"bundle/breakwater/operator/acme.rego", "bundle/breakwater/operator/acme_test.rego"}) ||
		!strings.HasSuffix(b.URL, "/bundles/breakwater.tar.gz") {
		t.Errorf("status %+v, bundle %+v", st, b)
	}
	if srv.auth.Load() != "Bearer bundle-token" {
		t.Errorf("Authorization sent: %v", srv.auth.Load())
	}

	// An unchanged bundle: 304, and the serving revision is untouched.
	before := f.p.state.Load()
	if err := f.p.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if srv.not.Load() != 1 || srv.full.Load() != 1 || f.p.state.Load() != before || f.p.Status().Bundle.NotModified != 1 {
		t.Errorf("304: served %d full, %d not modified; state swapped %v", srv.full.Load(), srv.not.Load(), f.p.state.Load() != before)
	}

	// rev-2 is picked up by the next poll.
	f.clock.Advance(time.Minute)
	srv.serve(bundleSpec{revision: "rev-2", files: acmeV2Files(), key: &key}.build(t))
	if err := f.p.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rev := f.p.Revision(); !strings.HasSuffix(rev, "+bundle.rev-2") {
		t.Fatalf("revision %q after rev-2", rev)
	}
	o := f.p.Classify(acmeFailure())
	if o.Status != 429 || o.RestatedFrom != 503 || o.RuleID != "acme.capacity_v2" || o.Scope != engine.ScopeModel {
		t.Errorf("rev-2 outcome %+v", o)
	}
	if b := f.p.Status().Bundle; b.Revision != "rev-2" || !b.LastActivated.Equal(epoch.Add(time.Minute)) || b.Polls != 3 {
		t.Errorf("bundle status %+v", b)
	}
}

func TestBundleRejectedKeepsServing(t *testing.T) {
	key, other := newSigningKey(t), newSigningKey(t)
	good := bundleSpec{revision: "good", files: acmeBundleFiles(), key: &key}
	srv := newBundleServer(t, good.build(t))
	f, logs := newBundleFixture(t, srv.srv.URL, &key, nil)
	if !strings.HasSuffix(f.p.Revision(), "+bundle.good") {
		t.Fatalf("revision %q", f.p.Revision())
	}
	failing := `package breakwater.operator_test

import data.breakwater.operator

test_wrong if {
	operator.classify.id == "nope" with input as {"provider": "acme", "status": 503, "body": "capacity"}
}
`
	for _, tc := range []struct {
		name string
		spec bundleSpec
		want string
	}{
		{"tampered", bundleSpec{revision: "tampered", files: acmeBundleFiles(), key: &key, tamper: "breakwater/operator/acme.rego"}, "digest mismatch"},
		{"unsigned", bundleSpec{revision: "unsigned", files: acmeBundleFiles()}, "bundle missing .signatures.json file"},
		{"signed by another key", bundleSpec{revision: "other-key", files: acmeBundleFiles(), key: &other}, "failed to verify JWT signature"},
		{"wrong root", bundleSpec{revision: "wrong-root", roots: []string{"breakwater"}, files: acmeBundleFiles(), key: &key},
			`bundle root "breakwater" is outside breakwater/operator`},
		{"data documents", bundleSpec{revision: "data", files: acmeBundleFiles(),
			data: map[string]any{"breakwater": map[string]any{"operator": map[string]any{"markers": []any{"x"}}}}, key: &key},
			"bundle carries data documents"},
		{"failing test", bundleSpec{revision: "failing", files: map[string]string{"breakwater/operator/acme.rego": acmeV1,
			"breakwater/operator/acme_test.rego": failing}, key: &key}, "breakwater.operator_test.test_wrong failed"},
		{"outside the operator package", bundleSpec{revision: "pkg", roots: []string{"breakwater/operator"},
			files: map[string]string{"x.rego": "package breakwater.classify\n\nx := 1\n"}, key: &key}, "do not permit"},
	} {
		srv.serve(tc.spec.build(t))
		err := f.p.Reload(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Reload = %v, want %q", tc.name, err, tc.want)
		}
		if !strings.HasSuffix(f.p.Revision(), "+bundle.good") || f.p.Classify(acmeFailure()).RuleID != "acme.capacity" {
			t.Errorf("%s: serving %q", tc.name, f.p.Revision())
		}
		if st := f.p.Status().Bundle; st.Revision != "good" || !strings.Contains(st.LastError, tc.want) {
			t.Errorf("%s: status %+v", tc.name, st)
		}
	}
	if n := f.p.Status().Bundle.Rejected; n != 7 {
		t.Errorf("rejected %d, want 7", n)
	}

	// A bad bundle fetched again and again (no ETag: downloaded each time)
	// is logged once.
	srv.mu.Lock()
	srv.noETag = true
	srv.mu.Unlock()
	srv.serve(bundleSpec{revision: "unsigned-again", files: acmeBundleFiles()}.build(t))
	for range 3 {
		if err := f.p.Reload(context.Background()); err == nil {
			t.Fatal("unsigned bundle accepted")
		}
	}
	if n := strings.Count(logs.String(), `etag=""`); n != 1 {
		t.Errorf("the rejection was logged %d times, want once:\n%s", n, logs.String())
	}
	// The good bundle again: accepted, error cleared.
	srv.serve(good.build(t))
	if err := f.p.Reload(context.Background()); err != nil || f.p.Status().Bundle.LastError != "" {
		t.Errorf("good bundle: %v, %+v", err, f.p.Status().Bundle)
	}
}

func TestBundleSigningOptions(t *testing.T) {
	key := newSigningKey(t)
	unsigned := bundleSpec{revision: "u", files: acmeBundleFiles()}.build(t)
	srv := newBundleServer(t, unsigned)

	// A key without required signing: unsigned bundles serve; signed ones
	// are verified.
	f, _ := newBundleFixture(t, srv.srv.URL, &key, func(o *BundleOptions) { o.SigningRequired = false })
	if st := f.p.Status().Bundle; st.Revision != "u" || st.Signed {
		t.Errorf("optional signing, unsigned: %+v", st)
	}
	srv.serve(bundleSpec{revision: "s", files: acmeBundleFiles(), key: &key, keyID: "ops-2026"}.build(t))
	if err := f.p.Reload(context.Background()); err != nil || !f.p.Status().Bundle.Signed {
		t.Errorf("optional signing, signed: %v, %+v", err, f.p.Status().Bundle)
	}
	srv.serve(bundleSpec{revision: "t", files: acmeBundleFiles(), key: &key, tamper: "breakwater/operator/acme.rego"}.build(t))
	if err := f.p.Reload(context.Background()); err == nil {
		t.Error("optional signing accepted a tampered bundle")
	}

	// A key id: the signature must name it.
	srv.serve(bundleSpec{revision: "k", files: acmeBundleFiles(), key: &key, keyID: "ops-2026"}.build(t))
	g, _ := newBundleFixture(t, srv.srv.URL, &key, func(o *BundleOptions) { o.KeyID = "ops-2026" })
	if st := g.p.Status().Bundle; st.Revision != "k" || !st.Signed {
		t.Errorf("key id: %+v", st)
	}

	// No key: nothing is verified.
	srv.serve(unsigned)
	h, _ := newBundleFixture(t, srv.srv.URL, nil, nil)
	if st := h.p.Status().Bundle; st.Revision != "u" || st.Signed {
		t.Errorf("no key: %+v", st)
	}
}

func TestBundleServerDownAtStart(t *testing.T) {
	srv := newBundleServer(t, nil)
	srv.status = http.StatusServiceUnavailable
	f, _ := newBundleFixture(t, srv.srv.URL+"/b.tar.gz?token=s3cr3t", nil, nil)
	st := f.p.Status()
	if st.Revision != f.p.builtin.revision || !strings.Contains(st.Bundle.LastError, "503") ||
		strings.Contains(st.Bundle.LastError, "s3cr3t") || strings.Contains(st.Bundle.URL, "s3cr3t") || st.Bundle.Rejected != 0 {
		t.Errorf("status %+v, bundle %+v", st, st.Bundle)
	}
	if o := f.p.Classify(acmeFailure()); o.RuleSource == SourceOperator {
		t.Errorf("no bundle yet, but an operator rule decided: %+v", o)
	}
}

// TestBundleFleetConverges runs two pipelines ("two instances") on one
// bundle server, each polling in its own Watch: both serve the same new
// revision after their next poll.
func TestBundleFleetConverges(t *testing.T) {
	key := newSigningKey(t)
	srv := newBundleServer(t, bundleSpec{revision: "2026.03.01-1", files: acmeBundleFiles(), key: &key}.build(t))
	var fleet []*Pipeline
	for range 2 {
		f, _ := newBundleFixture(t, srv.srv.URL, &key, func(o *BundleOptions) { o.PollInterval = MinBundlePollInterval })
		f.p.reloaded = make(chan struct{})
		fleet = append(fleet, f.p)
		runWatch(t, f.p)
	}
	for _, p := range fleet {
		if !strings.HasSuffix(p.Revision(), "+bundle.2026.03.01-1") {
			t.Fatalf("start: %q", p.Revision())
		}
	}
	srv.serve(bundleSpec{revision: "2026.03.01-2", files: acmeV2Files(), key: &key}.build(t))
	for _, p := range fleet {
		// A poll in flight when the bundle changed may still see the old
		// one; the next sees the new one.
		for range 2 {
			<-p.reloaded
			if strings.HasSuffix(p.Revision(), "+bundle.2026.03.01-2") {
				break
			}
		}
	}
	if a, b := fleet[0].Revision(), fleet[1].Revision(); a != b || !strings.HasSuffix(a, "+bundle.2026.03.01-2") {
		t.Errorf("instances serve %q and %q", a, b)
	}
	for _, p := range fleet {
		if o := p.Classify(acmeFailure()); o.Status != 429 {
			t.Errorf("instance outcome %+v", o)
		}
	}
}

func TestOperatorRootPath(t *testing.T) {
	for r, want := range map[string]bool{
		"breakwater/operator": true, "breakwater/operator/acme": true, "breakwater/operator_test": true,
		"breakwater": false, "breakwater/operatorx": false, "breakwater/classify": false, "": false, "breakwater/operator-x": false,
	} {
		if got := operatorRootPath(r); got != want {
			t.Errorf("operatorRootPath(%q) = %v", r, got)
		}
	}
}
