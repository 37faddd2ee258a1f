package plugins

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/memstore"
	"github.com/breakwater-dev/breakwater/plugins/abi"
)

// The SDK is its own module and cannot import abi, so it carries copies of
// the contract. These tests hold the copies to the original: statically
// (the SDK source) and dynamically (JSON through a real guest).

// sdkSource parses one file of the SDK.
func sdkSource(t *testing.T, name string) (*token.FileSet, *ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "../../sdk/"+name, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	return fset, f
}

func TestSDKTypesMatchABI(t *testing.T) {
	_, f := sdkSource(t, "types.go")
	structs := map[string]*ast.StructType{}
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok {
			if st, ok := ts.Type.(*ast.StructType); ok {
				structs[ts.Name.Name] = st
			}
		}
		return true
	})
	for _, typ := range []reflect.Type{
		reflect.TypeFor[abi.ErrorInput](), reflect.TypeFor[abi.Restatement](), reflect.TypeFor[abi.Decision](),
		reflect.TypeFor[abi.RequestInfo](), reflect.TypeFor[abi.RequestAction](),
		reflect.TypeFor[abi.RouteInput](), reflect.TypeFor[abi.RouteRequest](), reflect.TypeFor[abi.RouteCandidate](),
		reflect.TypeFor[abi.RouteAnswer](), reflect.TypeFor[abi.RouteExclusion](),
	} {
		st, ok := structs[typ.Name()]
		if !ok {
			t.Errorf("sdk lacks type %s", typ.Name())
			continue
		}
		var sdkFields []string
		for _, fld := range st.Fields.List {
			tag, _ := strconv.Unquote(fld.Tag.Value)
			for _, n := range fld.Names {
				sdkFields = append(sdkFields, n.Name+" "+types.ExprString(fld.Type)+" "+tag)
			}
		}
		var abiFields []string
		for i := range typ.NumField() {
			fl := typ.Field(i)
			ft := strings.ReplaceAll(fl.Type.String(), "abi.", "")
			if fl.Name == "Headers" {
				// Input headers are the SDK's read-in-place Headers type,
				// encoded exactly like a map.
				ft = "Headers"
			}
			abiFields = append(abiFields, fl.Name+" "+ft+" "+string(fl.Tag))
		}
		if !slices.Equal(sdkFields, abiFields) {
			t.Errorf("sdk.%s fields\n  %s\nwant (abi)\n  %s", typ.Name(),
				strings.Join(sdkFields, "\n  "), strings.Join(abiFields, "\n  "))
		}
	}
}

// sdkConstants evaluates the untyped constant expressions of a file.
func sdkConstants(t *testing.T, name string) map[string]int64 {
	t.Helper()
	fset, f := sdkSource(t, name)
	out := map[string]int64{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					continue
				}
				tv, err := types.Eval(fset, nil, vs.Values[i].Pos(), types.ExprString(vs.Values[i]))
				if err != nil {
					t.Fatalf("%s: %s: %v", name, n.Name, err)
				}
				v, _ := strconv.ParseInt(tv.Value.ExactString(), 10, 64)
				out[n.Name] = v
			}
		}
	}
	return out
}

func TestSDKConstantsMatchABI(t *testing.T) {
	c := sdkConstants(t, "types.go")
	want := map[string]int64{
		"ABIVersionMajor": abi.VersionMajor, "ABIVersionMinor": abi.VersionMinor,
		"FeatureRestate": int64(abi.FeatureRestate), "FeatureClassify": int64(abi.FeatureClassify),
		"FeatureOnRequest": int64(abi.FeatureOnRequest), "FeatureLog": int64(abi.FeatureLog),
		"FeatureKV": int64(abi.FeatureKV), "FeatureClock": int64(abi.FeatureClock), "FeatureBinary": int64(abi.FeatureBinary),
		"FeatureRoute": int64(abi.FeatureRoute), "MaxRouteCandidates": abi.MaxRouteCandidates,
		"MaxRouteHeaders": abi.MaxRouteHeaders, "MaxRouteHeaderBytes": abi.MaxRouteHeaderBytes,
		"LevelTrace": int64(abi.LogTrace), "LevelDebug": int64(abi.LogDebug), "LevelInfo": int64(abi.LogInfo),
		"LevelWarn": int64(abi.LogWarn), "LevelError": int64(abi.LogError),
		"MaxKeyBytes": abi.MaxKeyBytes, "MaxValueBytes": abi.MaxValueBytes,
		"MaxLogBytes": abi.MaxLogBytes, "MaxBodyBytes": abi.MaxBodyBytes,
	}
	for name, w := range want {
		if got, ok := c[name]; !ok || got != w {
			t.Errorf("sdk.%s = %d (present %v), want %d", name, got, ok, w)
		}
	}
	g := sdkConstants(t, "guest_wasip1.go")
	for name, w := range map[string]int32{"kvOK": abi.KVOK, "kvNotFound": abi.KVNotFound, "kvFailed": abi.KVFailed} {
		if got, ok := g[name]; !ok || got != int64(w) {
			t.Errorf("sdk %s = %d (present %v), want %d", name, got, ok, w)
		}
	}
}

// TestSDKReasonsAreTheHostsReasons holds the SDK's Reason and Scope
// constants to what the host accepts from a classify hook.
func TestSDKReasonsAreTheHostsReasons(t *testing.T) {
	_, f := sdkSource(t, "types.go")
	var reasons, scopes []string
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, _ := strconv.Unquote(lit.Value)
				switch {
				case strings.HasPrefix(n.Name, "Reason"):
					reasons = append(reasons, v)
				case strings.HasPrefix(n.Name, "Scope"):
					scopes = append(scopes, v)
				}
			}
		}
	}
	var host []string
	for r := range pluginReasons {
		host = append(host, r)
	}
	slices.Sort(reasons)
	slices.Sort(host)
	if !slices.Equal(reasons, host) {
		t.Errorf("sdk reasons %v, host accepts %v", reasons, host)
	}
	slices.Sort(scopes)
	wantScopes := []string{string(engine.ScopeConnection), string(engine.ScopeModel), string(engine.ScopeProvider)}
	if !slices.Equal(scopes, wantScopes) {
		t.Errorf("sdk scopes %v, want %v", scopes, wantScopes)
	}
}

// TestSDKExportsAndImportsMatchABI reads the SDK's //go:wasmexport and
// //go:wasmimport directives.
func TestSDKExportsAndImportsMatchABI(t *testing.T) {
	_, f := sdkSource(t, "guest_wasip1.go")
	var exports, imports []string
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			fields := strings.Fields(c.Text)
			switch {
			case len(fields) == 2 && fields[0] == "//go:wasmexport":
				exports = append(exports, fields[1])
			case len(fields) == 3 && fields[0] == "//go:wasmimport":
				if fields[1] != abi.ImportModule {
					t.Errorf("sdk imports from module %q, want %q", fields[1], abi.ImportModule)
				}
				imports = append(imports, fields[2])
			}
		}
	}
	wantExports := []string{abi.ExportAlloc, abi.ExportClassify, abi.ExportFeatures, abi.ExportOnRequest,
		abi.ExportRestate, abi.ExportRoute, abi.ExportVersionMajor, abi.ExportVersionMinor}
	wantImports := []string{abi.ImportKVGet, abi.ImportKVSet, abi.ImportLog, abi.ImportNowMS}
	slices.Sort(exports)
	slices.Sort(imports)
	slices.Sort(wantExports)
	if !slices.Equal(exports, wantExports) {
		t.Errorf("sdk exports %v, want %v", exports, wantExports)
	}
	if !slices.Equal(imports, wantImports) {
		t.Errorf("sdk imports %v, want %v", imports, wantImports)
	}
}

// describe is the echo guest's description of an ErrorInput.
func describe(in abi.ErrorInput) string {
	var hs []string
	for k, v := range in.Headers {
		hs = append(hs, k+"="+v)
	}
	slices.Sort(hs)
	return strings.Join([]string{in.Provider, in.Connection, in.Model, in.Profile, strconv.Itoa(in.Status),
		in.ErrorCode, in.ErrorType, in.Body, strings.Join(hs, ";")}, "|")
}

// TestSDKRoundTripThroughGuest sends every field of every input type
// through the echo guest (SDK decode) and checks every field of every
// answer type (SDK encode, abi decode). It also covers the KV, clock and
// log host functions and the host's input hygiene.
func TestSDKRoundTripThroughGuest(t *testing.T) {
	skipUnderRace(t)
	clock := clocktest.NewClock(testNow)
	store := memstore.New(clock)
	th := newTestHost(t, Options{Store: store, Clock: clock})
	ctx := context.Background()
	if err := th.Load(ctx, []Spec{{Name: "echo", Path: guest(t, "echo")}}); err != nil {
		t.Fatal(err)
	}
	if st := th.status(t, "echo"); strings.Join(st.Hooks, ",") != "restate,classify,on_request,route" ||
		strings.Join(st.Features, ",") != "restate,classify,on_request,log,kv,clock,binary,route" {
		t.Fatalf("hooks %v, features %v; want every hook derived from the guest's features", st.Hooks, st.Features)
	}
	in := abi.ErrorInput{
		Provider: "acmé", Connection: "acme/main", Model: "gpt-5\u2028x", Profile: "oauth", Status: 429,
		Headers: map[string]string{
			"retry-after": "7", "x-quote": `say "hi" <b>&amp;</b>`, "x-ctl": "tab\there\nnewline\x01",
			"authorization": "Bearer sk-secret", "x-api-key": "sk-secret-2", "x-emoji": "🚀 \U0001F600",
		},
		ErrorCode: "insufficient_quota", ErrorType: "rate_limit_error",
		Body: `{"error":{"message":"Quota \"exceeded\" \\ check plan","code":429}}` + "\u00e9",
	}
	clean := in
	clean.Headers = withoutCredentials(in.Headers)
	if _, leaked := clean.Headers["authorization"]; leaked || len(clean.Headers) != 4 {
		t.Fatalf("withoutCredentials left %v", clean.Headers)
	}

	for call := 1; call <= 2; call++ {
		clock.Advance(1500 * time.Millisecond)
		d, ok := th.Classify(ctx, in)
		want := abi.Decision{Reason: "transient", Scope: "model", CooldownMS: clock.Now().UnixMilli(),
			RuleID: describe(clean) + "#" + strconv.Itoa(call)}
		if !ok || d != want {
			t.Fatalf("Classify #%d =\n  %+v\nwant\n  %+v", call, d, want)
		}
		v, found, err := store.Get(ctx, "plugin/echo/calls")
		if err != nil || !found || string(v) != strconv.Itoa(call) {
			t.Fatalf("store plugin/echo/calls = %q, %v, %v; want %d", v, found, err, call)
		}
	}
	if !strings.Contains(th.logs.String(), "test.plugin.echo: echo classify call 2") {
		t.Errorf("guest log missing:\n%s", th.logs.String())
	}

	r, ok := th.Restate(ctx, in)
	if want := (abi.Restatement{Status: 430, RetryAfterMS: int64(len(in.Body)), RuleID: describe(clean)}); !ok || r != want {
		t.Fatalf("Restate = %+v, %v; want %+v", r, ok, want)
	}
	// Bodies are cut to MaxBodyBytes on a rune boundary.
	long := in
	long.Body = strings.Repeat("é", abi.MaxBodyBytes) // 2 bytes each
	if r, ok := th.Restate(ctx, long); !ok || r.RetryAfterMS != abi.MaxBodyBytes {
		t.Fatalf("Restate of a long body saw %d bytes, want %d", r.RetryAfterMS, abi.MaxBodyBytes)
	}

	req := abi.RequestInfo{Model: "gpt-5", Path: "/v1/chat/completions", KeyID: "key-7",
		Headers: map[string]string{"x-team": "blue \"sky\"", "Authorization": "Bearer sk-client"}}
	a, ok := th.OnRequest(ctx, req)
	wantAction := abi.RequestAction{Model: "gpt-5-rewritten", SetHeaders: map[string]string{
		"x-echo-path": "/v1/chat/completions", "x-echo-key": "key-7", "x-echo-x-team": "blue \"sky\""}}
	if !ok || !reflect.DeepEqual(a, wantAction) {
		t.Fatalf("OnRequest = %+v, %v; want %+v (no credential header)", a, ok, wantAction)
	}
	req.Model = "reject"
	a, ok = th.OnRequest(ctx, req)
	if want := (abi.RequestAction{RejectStatus: 403, RejectMessage: "key key-7 may not use /v1/chat/completions"}); !ok || !reflect.DeepEqual(a, want) {
		t.Fatalf("OnRequest(reject) = %+v, %v; want %+v", a, ok, want)
	}
	if st := th.status(t, "echo"); st.Errors != 0 || st.Calls != 6 {
		t.Fatalf("echo calls, errors = %d, %d; want 6, 0 (last error %q)", st.Calls, st.Errors, st.LastError)
	}
}
