package policies

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// catCase is one input of the differential tests: what the catalogue
// reads, and the status as sent.
type catCase struct {
	cat    catInput
	status int
}

func (c catCase) String() string {
	return fmt.Sprintf("provider=%q status=%d headers=%v code=%q type=%q body=%q text=%q now_ms=%d",
		c.cat.provider, c.status, c.cat.headers, c.cat.code, c.cat.typ, c.cat.body, c.cat.text, c.cat.nowMS)
}

// newCatCase builds a case as the gateway reads an attempt.
func newCatCase(provider string, status int, body string, headers map[string]string, code, typ string, now time.Time) catCase {
	in := engine.ErrorInput{Provider: provider, Connection: "conn-1", Model: "model-x", Profile: engine.ProfileAPIKey,
		Status: status, Headers: headers, Body: body, ErrorCode: code, ErrorType: typ}
	return catCase{cat: newCatInput(&in, now), status: status}
}

// catDiff runs c through the Rego queries of the built-in policies (q)
// and the Go version, and returns the differences: judged_builtin and
// decisions for the status as sent, classified for the status as sent
// and for each status in restated (as after a Go-side restatement). A
// query the Go version leaves to Rego is not compared; delegated counts
// them.
func catDiff(t testing.TB, q queries, c catCase, restated []int, delegated *int) []string {
	t.Helper()
	ctx := context.Background()
	doc := newInputDocFrom(&c.cat, c.status)
	eval := func(pq rego.PreparedEvalQuery, status int) ast.Value {
		rs, err := pq.Eval(ctx, rego.EvalParsedInput(doc.value(status)))
		if err != nil {
			t.Fatalf("%v: Rego evaluation: %v", c, err)
		}
		if len(rs) == 0 {
			return nil
		}
		return rs[0].Expressions[0].Value.(*ast.Term).Value
	}
	var diffs []string
	compare := func(query string, status int, rv ast.Value, gv ast.Object, ok bool) {
		if !ok {
			*delegated++
			return
		}
		var gval ast.Value
		if gv != nil {
			gval = gv
		}
		if (rv == nil) != (gval == nil) || rv != nil && rv.Compare(gval) != 0 {
			diffs = append(diffs, fmt.Sprintf("%s (status %d): Rego %v, Go %v", query, status, rv, gval))
		}
	}
	gv, ok := c.cat.goJudgedBuiltin(c.status)
	compare("judged_builtin", c.status, eval(q.judged, c.status), gv, ok)
	gv, ok = c.cat.goDecisions(c.status)
	compare("decisions", c.status, eval(q.decisions, c.status), gv, ok)
	for _, s := range append([]int{c.status}, restated...) {
		gv, ok = c.cat.goClassified(s)
		compare("classified", s, eval(q.classified, s), gv, ok)
	}
	return diffs
}

// builtinQueries prepares the built-in policies' queries.
func builtinQueries(t testing.TB) queries {
	t.Helper()
	b, err := loadBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	q, err := prepareQueries(context.Background(), b.policyModules(false))
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// bundleTestInputs runs the bundle's own Rego tests with tracing and
// returns every distinct input document they evaluate with.
func bundleTestInputs(t *testing.T) []ast.Object {
	t.Helper()
	b, err := loadBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := tester.NewRunner().SetCompiler(newCompiler(true)).SetModules(b.policyModules(true)).
		SetTimeout(testTimeout).EnableTracing(true).RunTests(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []ast.Object
	tests := 0
	for r := range ch {
		if !r.Pass() {
			t.Fatalf("bundle test %s.%s fails: %v", r.Package, r.Name, r.Error)
		}
		tests++
		for _, e := range r.Trace {
			in := e.Input()
			if in == nil {
				continue
			}
			o, ok := in.Value.(ast.Object)
			if ok && o.IsGround() && !slices.ContainsFunc(out, func(x ast.Object) bool { return x.Compare(o) == 0 }) {
				out = append(out, o)
			}
		}
	}
	if tests < 50 {
		t.Fatalf("ran %d bundle tests, want the whole bundle's", tests)
	}
	return out
}

// caseFromInput reads a Rego input document as the catalogue sees it;
// false when a field has a type the gateway never sends. A missing text
// is computed as data.breakwater.lib.text computes it.
func caseFromInput(o ast.Object) (catCase, bool) {
	var c catCase
	str := func(v ast.Value) (string, bool) {
		if v == nil {
			return "", true
		}
		s, ok := v.(ast.String)
		return string(s), ok
	}
	get := func(o ast.Object, key string) ast.Value {
		if t := o.Get(ast.StringTerm(key)); t != nil {
			return t.Value
		}
		return nil
	}
	var ok bool
	if c.cat.provider, ok = str(get(o, "provider")); !ok {
		return c, false
	}
	status, okS := asInt(get(o, "status"))
	if !okS {
		return c, false
	}
	c.status = int(status)
	if v := get(o, "now_ms"); v != nil {
		if c.cat.nowMS, ok = asInt(v); !ok {
			return c, false
		}
	}
	if v := get(o, "headers"); v != nil {
		h, isObj := v.(ast.Object)
		if !isObj {
			return c, false
		}
		m := map[string]string{}
		for _, k := range h.Keys() {
			name, okN := k.Value.(ast.String)
			val, okV := h.Get(k).Value.(ast.String)
			if !okN || !okV {
				return c, false
			}
			m[string(name)] = string(val)
		}
		c.cat.headers = lowerHeaders(m)
	}
	if v := get(o, "error"); v != nil {
		e, isObj := v.(ast.Object)
		if !isObj {
			return c, false
		}
		okC, okT := true, true
		c.cat.code, okC = str(get(e, "code"))
		c.cat.typ, okT = str(get(e, "type"))
		if !okC || !okT {
			return c, false
		}
	}
	if c.cat.body, ok = str(get(o, "body")); !ok {
		return c, false
	}
	text := get(o, "text")
	if c.cat.text, ok = str(text); !ok {
		return c, false
	}
	if text == nil {
		c.cat.text = strings.ToLower(c.cat.body + " " + c.cat.code + " " + c.cat.typ)
	}
	return c, true
}

// corpusStride is 1 when every corpus input is compared, k when one in k
// is (under -race, where the whole corpus takes minutes; the other runs
// compare all of it).
func corpusStride() int {
	if raceEnabled {
		return 4
	}
	return 1
}

// restatedStatuses are the statuses a Go-side restatement (an operator
// rule, a plugin) might yield, each judged by the classified query.
var restatedStatuses = []int{400, 402, 403, 429, 503}

// TestGoCatalogueMatchesRego runs every input of the bundle's own
// _test.rego files through the Rego catalogue and its Go version and
// requires the same documents from every query the pipeline evaluates.
func TestGoCatalogueMatchesRego(t *testing.T) {
	q := builtinQueries(t)
	inputs := bundleTestInputs(t)
	used, delegated := 0, 0
	for _, o := range inputs {
		c, ok := caseFromInput(o)
		if !ok {
			continue
		}
		used++
		for _, d := range catDiff(t, q, c, restatedStatuses, &delegated) {
			t.Errorf("%v\n  %s", c, d)
		}
	}
	// The bundle's tests evaluate ~100 distinct inputs; nearly all have
	// the gateway's shape.
	if used < 80 {
		t.Fatalf("compared %d of %d bundle test inputs, want at least 80", used, len(inputs))
	}
	t.Logf("%d bundle test inputs compared (%d of them not of the gateway's shape skipped), %d queries left to Rego",
		used, len(inputs)-used, delegated)
}

// Documented provider error bodies (docs/resilience.md §2, §10, §11 and
// the providers' own documentation), and bodies near the catalogue's
// markers.
var corpusBodies = []string{
	"",
	"not json at all",
	`{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 30000, Requested 1200. Please try again in 2.4s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
	`{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","code":"rate_limit_exceeded"}}`,
	`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
	`{"error":{"message":"Incorrect API key provided: sk-abc. The key has been revoked.","type":"invalid_request_error","code":"invalid_api_key"}}`,
	`{"error":{"message":"Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length 200 instead.","type":"invalid_request_error","param":"tools","code":"array_above_max_length"}}`,
	`{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`,
	`{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50 requests per minute."}}`,
	`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
	`{"type":"error","error":{"type":"authentication_error","message":"API key revoked"}}`,
	`{"type":"error","error":{"type":"billing_error","message":"billing issue"}}`,
	`{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-pro"},"quotaValue":"50"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"86399s"}]}}`,
	`{"error":{"code":400,"message":"API key expired. Please renew the API key.","status":"INVALID_ARGUMENT"}}`,
	`{"error":{"code":400,"message":"At most 512 function declarations can be specified.","status":"INVALID_ARGUMENT"}}`,
	`{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}`,
	`{"code":"Some resource has been exhausted","error":"Your team has either used all available credits or reached its monthly spending limit."}`,
	`{"error":{"message":"Insufficient credits. Add more using https://openrouter.ai/settings/credits","code":402}}`,
	`{"errors":[{"message":"AiError: you have used up your daily free allocation of 10,000 neurons, please upgrade to Cloudflare's Workers Paid plan if you would like to continue usage.","code":4006}],"success":false}`,
	`{"base_resp":{"status_code":1002,"status_msg":"rate limit exceeded(RPM)"}}`,
	`{"type":"error","error":{"type":"api_error","message":"Upstream request failed: Endpoint is unavailable."}}`,
	`{"error":{"message":"Model is disabled: kimi-k2","type":"invalid_request_error"}}`,
	agentQuotaBody,
	agentQuotaBody2,
	agentNoAccessBody,
	`{"error":{"message":"用户额度不足 该令牌无权访问模型 x","type":"new_api_error"}}`,
	`{"error":{"message":"余额不足","type":"new_api_error"}}`,
	`{"error":{"message":"当前分组上游负载已饱和，请稍后再试 并发数过高","type":"new_api_error"}}`,
	`{"error":{"message":"Too many concurrent requests for this model","type":"rate_limit"}}`,
	`{"error":{"message":"Weekly limit reached, resets Monday","type":"usage_limit"}}`,
	`{"error":{"message":"the request has a maximum of 128 tools","type":"invalid_request_error"}}`,
	`{"error":{"message":"You may not include more than 128 tools in your request.","code":"invalid_request_body"}}`,
	`{"error":{"message":"Daily Limit exceeded; try again tomorrow"}}`,
	"Service Unavailable",
}

// corpusHeaders are response header sets of the kinds the catalogue reads.
var corpusHeaders = []map[string]string{
	nil,
	{"retry-after": "2", "content-type": "application/json"},
	{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s"},
	{"X-RateLimit-Remaining-Tokens": " 0 ", "X-RateLimit-Limit-Tokens": "30000"},
	{"x-ratelimit-remaining-requests": "12"},
	{"x-ratelimit-remaining-model-tokens": "0", "x-ratelimit-remaining-requests": "5"},
	{"anthropic-ratelimit-requests-remaining": "0", "retry-after": "30"},
	{"anthropic-ratelimit-tokens-remaining": "0", "anthropic-ratelimit-unified-status": "rejected"},
	{"anthropic-ratelimit-unified-5h-remaining": "0"},
	{"Anthropic-Ratelimit-Output-Tokens-Remaining": "0"},
	{"X-A": "0", "x-a": "1", "x-ratelimit-remaining-x": "0"},
}

var (
	corpusProviders = []string{"agentrouter", "opencode", "minimax", "openrouter", "cloudflare", "openai",
		"anthropic", "gemini", "deepseek", "xai", "acme"}
	corpusStatuses = []int{400, 401, 402, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 529, 99, 600}
	// corpusErrorFields are structured error code and type pairs.
	corpusErrorFields = [][2]string{{"", ""}, {"insufficient_quota", ""}, {"", "billing_error"},
		{"rate_limit_exceeded", "requests"}, {"Credit_Balance_Exhausted", ""}, {"", "Insufficient_Quota"}, {"", "new_api_error"}}
	// corpusNows are arrival times around UTC midnight and before 1970.
	corpusNows = []time.Time{epoch, time.Date(2025, 6, 1, 23, 59, 59, 999e6, time.UTC),
		time.Date(2025, 6, 2, 0, 0, 0, 0, time.UTC), time.Date(1969, 12, 31, 12, 0, 0, 1e6, time.UTC)}
)

// TestGoCatalogueMatchesRegoOnCorpus compares the Rego catalogue and its
// Go version on a generated corpus: every provider × status × documented
// body, with the header set, structured error fields and arrival time
// rotating, and every provider × header set with half the bodies (in
// turn) as a 429.
func TestGoCatalogueMatchesRegoOnCorpus(t *testing.T) {
	q := builtinQueries(t)
	n, delegated, seen := 0, 0, 0
	run := func(c catCase) {
		if seen++; seen%corpusStride() != 0 {
			return
		}
		n++
		for _, d := range catDiff(t, q, c, []int{403, 429}, &delegated) {
			t.Errorf("%v\n  %s", c, d)
		}
	}
	for i, p := range corpusProviders {
		for j, s := range corpusStatuses {
			for k, body := range corpusBodies {
				r := i + j + k
				ef := corpusErrorFields[r%len(corpusErrorFields)]
				run(newCatCase(p, s, body, corpusHeaders[r%len(corpusHeaders)], ef[0], ef[1], corpusNows[r%len(corpusNows)]))
			}
		}
		for j, h := range corpusHeaders {
			for k, body := range corpusBodies {
				if (i+j+k)%2 == 0 {
					ef := corpusErrorFields[k%len(corpusErrorFields)]
					run(newCatCase(p, 429, body, h, ef[0], ef[1], epoch))
				}
			}
		}
	}
	t.Logf("%d corpus inputs compared, %d queries left to Rego", n, delegated)
}

// FuzzGoCatalogue compares the Rego catalogue and its Go version on
// fuzzed attempts.
func FuzzGoCatalogue(f *testing.F) {
	for i, body := range corpusBodies {
		p := corpusProviders[i%len(corpusProviders)]
		f.Add(p, corpusStatuses[i%len(corpusStatuses)], body, "x-ratelimit-remaining-requests", "0", "", "", epoch.UnixMilli())
		f.Add(p, 429, body, "anthropic-ratelimit-tokens-remaining", " 0", "insufficient_quota", "", int64(0))
	}
	f.Add("cloudflare", 429, "daily free allocation", "retry-after", "1", "", "", int64(-1))
	f.Add("agentrouter", 403, "额度不足", "", "", "", "new_api_error", int64(1748822399999))
	q := builtinQueries(f)
	f.Fuzz(func(t *testing.T, provider string, status int, body, hname, hval, code, typ string, nowMS int64) {
		var h map[string]string
		if hname != "" {
			h = map[string]string{hname: hval}
		}
		c := newCatCase(provider, status, body, h, code, typ, time.UnixMilli(nowMS))
		delegated := 0
		for _, d := range catDiff(t, q, c, []int{429, 400}, &delegated) {
			t.Errorf("%v\n  %s", c, d)
		}
	})
}

// TestGoCatalogueSameOutcomeAndExplanation runs the corpus through the
// whole pipeline twice, once with the Go catalogue and once with the Rego
// one, and requires the same Outcome and the same Explain (trace
// included), operator rules loaded.
func TestGoCatalogueSameOutcomeAndExplanation(t *testing.T) {
	ctx := context.Background()
	goP := newFixture(t, Options{}).p
	regoP := newFixture(t, Options{}).p
	if !goP.state.Load().goCatalogue {
		t.Fatal("a pipeline serving the built-in policies alone does not use the Go catalogue")
	}
	st := *regoP.state.Load()
	st.goCatalogue = false
	regoP.state.Store(&st)
	rules := []OperatorRule{
		{Provider: "acme", Status: 503, RestateTo: 429, Match: "busy"},
		{Provider: "acme", Match: "/(?i)credit balance .* account-7/", Reason: "credits_exhausted", Scope: "connection"},
		{Provider: "deepseek", Header: "x-account-state=suspended", Reason: "banned", Scope: "provider"},
	}
	for _, p := range []*Pipeline{goP, regoP} {
		if err := p.SetOperatorRules(ctx, rules); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for i, p := range append(corpusProviders, "acme") {
		for j, s := range corpusStatuses {
			for k, body := range append(corpusBodies, "busy", "credit balance low for account-7") {
				r := i + j + k
				if (r+k)%corpusStride() != 0 {
					continue
				}
				ef := corpusErrorFields[r%len(corpusErrorFields)]
				in := failure(p, s, body, corpusHeaders[r%len(corpusHeaders)])
				in.ErrorCode, in.ErrorType, in.Now = ef[0], ef[1], corpusNows[r%len(corpusNows)]
				if r%5 == 0 {
					in.Now = time.Time{} // the pipeline's clock
				}
				n++
				if g, w := goP.Classify(in), regoP.Classify(in); !reflect.DeepEqual(g, w) {
					t.Errorf("%s %d %q: outcome\n Go   %+v\n Rego %+v", p, s, body, g, w)
				}
				if g, w := goP.Explain(in), regoP.Explain(in); !reflect.DeepEqual(g, w) {
					t.Errorf("%s %d %q: explanation\n Go   %+v\n Rego %+v", p, s, body, g, w)
				}
			}
		}
	}
	t.Logf("%d attempts compared", n)
}

// TestGoCatalogueDigest checks that the Go catalogue was written for the
// bundle's catalogue as it is. When this fails after a change to a
// catalogue file (catalogueFiles), bring catalogue.go in step, make the
// differential tests above pass, then set goCatalogueDigest to the digest
// printed here: until then the pipeline evaluates the catalogue in Rego.
func TestGoCatalogueDigest(t *testing.T) {
	b, err := loadBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	if got := b.catalogueDigest(); got != goCatalogueDigest {
		t.Fatalf("the built-in catalogue changed (digest %s, Go version written for %s): bring catalogue.go in step", got, goCatalogueDigest)
	}
	// A changed catalogue file switches the Go version off.
	for i, s := range b.sources {
		if strings.HasSuffix(s.name, "/classify.rego") {
			b.sources[i].text += "\n# changed\n"
		}
	}
	if b.catalogueDigest() == goCatalogueDigest {
		t.Fatal("a change to classify.rego leaves the digest as it was")
	}
}

// TestGoCatalogueOnlyForTheBuiltinPolicies checks which revisions the Go
// catalogue serves: the built-in policies alone, not a revision with
// operator .rego files (they may read the catalogue's documents, and
// their decisions come from the Rego evaluation), and again once they are
// gone; a bundle-server revision with policies neither. Operator rules
// (Go) and plugins are consulted around the catalogue and leave it on.
func TestGoCatalogueOnlyForTheBuiltinPolicies(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f := newFixture(t, Options{Dir: dir})
	on := func(want bool) {
		t.Helper()
		st := f.p.state.Load()
		if st.goCatalogue != want || st.builtinOnly != want {
			t.Fatalf("revision %s: goCatalogue %t, builtinOnly %t; want %t", st.revision, st.goCatalogue, st.builtinOnly, want)
		}
	}
	on(true)
	if err := f.p.SetOperatorRules(ctx, []OperatorRule{{Provider: "acme", Match: "nope", Reason: "rate_limit", Scope: "connection"}}); err != nil {
		t.Fatal(err)
	}
	on(true)
	quota := failure("agentrouter", 403, agentQuotaBody, nil)
	check(t, f.p.Classify(quota), want{status: 429, restatedFrom: 403, clientRetryAfter: time.Minute,
		reason: engine.ReasonQuotaExhausted, scope: engine.ScopeConnection, ruleID: "agentrouter.quota", source: SourceBuiltin, retryable: true})

	writeFile(t, dir, "acme.rego", acmeV1)
	writeFile(t, dir, "acme_test.rego", acmeV1Test)
	if err := f.p.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	on(false)
	if o := f.p.Classify(acmeFailure()); o.RuleID != "acme.capacity" || o.RuleSource != SourceOperator {
		t.Errorf("operator policy outcome %+v", o)
	}
	check(t, f.p.Classify(quota), want{status: 429, restatedFrom: 403, clientRetryAfter: time.Minute,
		reason: engine.ReasonQuotaExhausted, scope: engine.ScopeConnection, ruleID: "agentrouter.quota", source: SourceBuiltin, retryable: true})

	for _, name := range []string{"acme.rego", "acme_test.rego"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.p.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	on(true)

	srv := newBundleServer(t, bundleSpec{revision: "rev-1", files: acmeBundleFiles()}.build(t))
	bf, _ := newBundleFixture(t, srv.srv.URL+"/bundles/breakwater.tar.gz", nil, nil)
	if st := bf.p.state.Load(); st.goCatalogue || st.builtinOnly {
		t.Fatalf("bundle revision %s: goCatalogue %t, builtinOnly %t", st.revision, st.goCatalogue, st.builtinOnly)
	}
}

// TestLowerBodyIsTheTextsStart checks catInput.lowerBody against
// strings.ToLower of the body, bodies and error fields with upper-case,
// non-ASCII, invalid and cut UTF-8 included.
func TestLowerBodyIsTheTextsStart(t *testing.T) {
	parts := []string{"", "A", "额度", "\xe9\xa2", "\xff", "İ", "\u212a", " ", "Ǆ"}
	for _, body := range parts {
		for _, b2 := range parts {
			for _, code := range parts {
				for _, typ := range []string{"", "X\xe9", "Type"} {
					in := engine.ErrorInput{Body: body + b2, ErrorCode: code, ErrorType: typ}
					c := newCatInput(&in, epoch)
					if got, want := c.lowerBody(), strings.ToLower(in.Body); got != want {
						t.Errorf("body %q code %q type %q: lowerBody %q, want %q", in.Body, code, typ, got, want)
					}
				}
			}
		}
	}
}
