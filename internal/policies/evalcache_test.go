package policies

import (
	"fmt"
	"sync"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

func TestEvalCacheFrames(t *testing.T) {
	var pool evalCachePool
	c := pool.get()
	ref := ast.MustParseRef("data.breakwater.classify.decision")
	other := ast.MustParseRef("data.breakwater.restate.decision")
	one, two := ast.IntNumberTerm(1), ast.IntNumberTerm(2)

	if v, undef := c.Get(ref); v != nil || undef {
		t.Fatalf("empty cache: %v %t", v, undef)
	}
	c.Put(ref, one)
	c.Put(other, nil)
	if v, undef := c.Get(ast.MustParseRef("data.breakwater.classify.decision")); v != one || undef {
		t.Fatalf("Get after Put: %v %t", v, undef)
	}
	if v, undef := c.Get(other); v != nil || !undef {
		t.Fatalf("undefined reference: %v %t", v, undef)
	}
	// A pushed frame (a `with`) starts empty and is dropped by Pop.
	c.Push()
	if v, undef := c.Get(ref); v != nil || undef {
		t.Fatalf("new frame sees the outer one: %v %t", v, undef)
	}
	c.Put(ref, two)
	if v, _ := c.Get(ref); v != two {
		t.Fatalf("inner frame: %v", v)
	}
	if keys := c.Keys(); len(keys) != 1 || !keys[0].Equal(ref) {
		t.Fatalf("Keys of the inner frame: %v", keys)
	}
	c.Pop()
	if v, _ := c.Get(ref); v != one {
		t.Fatalf("outer frame after Pop: %v", v)
	}
	// Put copies the reference: the caller may reuse its slice.
	buf := ast.MustParseRef("data.x.y")
	c.Put(buf, two)
	buf[2] = ast.StringTerm("z")
	if v, _ := c.Get(ast.MustParseRef("data.x.y")); v != two {
		t.Fatalf("entry changed with the caller's slice: %v", v)
	}
	// Like OPA's cache, a reference recorded undefined stays undefined.
	c.Put(other, one)
	if v, undef := c.Get(other); v != nil || !undef {
		t.Fatalf("undefined then defined: %v %t", v, undef)
	}
	// A returned cache comes back empty.
	pool.put(c)
	c = pool.get()
	if v, undef := c.Get(ref); v != nil || undef || len(c.frames) != 1 || len(c.terms) != 0 {
		t.Fatalf("recycled cache not empty: %v %t %v", v, undef, c.frames)
	}
	c.Pop() // the base frame stays
	if len(c.frames) != 1 {
		t.Fatalf("Pop removed the base frame")
	}
}

func TestHeadersObject(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]string
		want string
	}{
		{nil, `{}`},
		{map[string]string{"retry-after": "2", "x-a": "1"}, `{"retry-after": "2", "x-a": "1"}`},
		{map[string]string{"Retry-After": "2", "X-RateLimit-Remaining-Requests": "0"}, `{"retry-after": "2", "x-ratelimit-remaining-requests": "0"}`},
	} {
		want := ast.MustParseTerm(tc.want).Value
		if got := headersObject(tc.in); got.Compare(want) != 0 {
			t.Errorf("headersObject(%v) = %v, want %v", tc.in, got, want)
		}
	}
	// Names equal but for case become one header.
	got := headersObject(map[string]string{"X-A": "1", "x-a": "2"})
	if got.Len() != 1 || got.Get(ast.StringTerm("x-a")) == nil {
		t.Fatalf("duplicate names kept: %v", got)
	}
}

// TestConcurrentClassifyMatchesSerial checks that evaluations sharing the
// prepared queries and the cache pool do not see each other's documents:
// concurrent outcomes equal the serial ones.
func TestConcurrentClassifyMatchesSerial(t *testing.T) {
	f := newFixture(t, Options{})
	inputs := []engine.ErrorInput{
		failure("agentrouter", 403, agentQuotaBody, nil),
		failure("agentrouter", 403, agentNoAccessBody, nil),
		failure("agentrouter", 400, agentQuotaBody2, map[string]string{"retry-after-ms": "5000"}),
		failure("openai", 429, `{"error":{"message":"You exceeded your current quota"}}`, map[string]string{"x-ratelimit-remaining-tokens": "0"}),
		failure("minimax", 429, "", map[string]string{"x-ratelimit-remaining-model-requests": "0"}),
		failure("cloudflare", 429, cloudflareBody, nil),
		failure("opencode", 400, `{"error":{"message":"Model is disabled"}}`, nil),
		failure("openai", 500, "boom", nil),
	}
	want := make([]engine.Outcome, len(inputs))
	for i, in := range inputs {
		want[i] = f.p.Classify(in)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Go(func() {
			for n := range 200 {
				i := (g + n) % len(inputs)
				if got := f.p.Classify(inputs[i]); got != want[i] {
					errs <- fmt.Sprintf("%s %d: %+v, want %+v", inputs[i].Provider, inputs[i].Status, got, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
