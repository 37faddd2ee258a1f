package mock

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
)

func TestStatsMaxConcurrentPerKey(t *testing.T) {
	m := startMock(t, `
rules:
  - key: k1
    responses: [{stall_after_chunks: 0}]
`)
	const parallel = 5
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg, answered sync.WaitGroup
	errs := make(chan error, parallel)
	for i := 0; i < parallel; i++ {
		wg.Add(1)
		answered.Add(1)
		go func() {
			defer wg.Done()
			// Do returns once the stalled stream's headers arrive.
			resp, err := m.do(ctx, http.MethodPost, "/v1/chat/completions", "k1", chatBody("gpt-4o", "hi", true, false))
			answered.Done()
			if err != nil {
				errs <- err
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body) // blocks until cancel
			resp.Body.Close()
		}()
	}
	st := m.waitStats(func(s Stats) bool { return s.ByKey["k1"].InFlight == parallel })
	if ks := st.ByKey["k1"]; ks.MaxConcurrent != parallel || ks.Calls != parallel {
		t.Errorf("k1 while stalled = %+v", ks)
	}

	// Sequential calls of another key, via x-api-key, run beside them.
	for i := 0; i < 3; i++ {
		if status, _, _ := m.post("/v1/messages", "x:k2", messagesBody("claude-haiku-4", "hi", false)); status != 200 {
			t.Fatalf("k2 status %d", status)
		}
	}
	m.post("/v1/chat/completions", "", chatBody("gpt-4o", "hi", false, false))

	st = m.srv.Stats()
	if st.InFlight != parallel || st.MaxConcurrent != parallel+1 {
		t.Errorf("global in_flight %d max %d, want %d and %d", st.InFlight, st.MaxConcurrent, parallel, parallel+1)
	}
	// The server counts a call in flight before its caller has read the
	// headers: cancel only once every caller has them, or a caller
	// still in Do sees its own cancellation.
	answered.Wait()
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("caller: %v", err)
	}
	st = m.waitStats(func(s Stats) bool { return s.InFlight == 0 })

	want := Stats{
		Total: parallel + 4, Completed: 4, Cancellations: parallel, InFlight: 0, MaxConcurrent: parallel + 1,
		ByKey: map[string]KeyStats{
			"k1":         {Calls: parallel, Cancellations: parallel, MaxConcurrent: parallel},
			"k2":         {Calls: 3, Completed: 3, MaxConcurrent: 1},
			AnonymousKey: {Calls: 1, Completed: 1, MaxConcurrent: 1},
		},
		ByKeyModel: map[string]uint64{"k1|gpt-4o": parallel, "k2|claude-haiku-4": 3, "-|gpt-4o": 1},
	}
	if got, exp := fmt.Sprintf("%+v", st), fmt.Sprintf("%+v", want); got != exp {
		t.Errorf("stats\n got %s\nwant %s", got, exp)
	}
}

func TestStatsParallelCallers(t *testing.T) {
	m := startMock(t, "")
	const workers, calls = 8, 25
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("key%d", w%4)
			for i := 0; i < calls; i++ {
				stream := i%2 == 0
				resp, err := m.do(context.Background(), http.MethodPost, "/v1/chat/completions", key, chatBody(fmt.Sprintf("m%d", i%2), "hi", stream, false))
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	st := m.waitStats(func(s Stats) bool { return s.InFlight == 0 })
	if st.Total != workers*calls || st.Completed != workers*calls || st.Cancellations != 0 {
		t.Errorf("totals = %+v", st)
	}
	for k := 0; k < 4; k++ {
		key := fmt.Sprintf("key%d", k)
		ks := st.ByKey[key]
		if ks.Calls != 2*calls || ks.Completed != 2*calls || ks.MaxConcurrent < 1 || ks.MaxConcurrent > 2 {
			t.Errorf("%s = %+v", key, ks)
		}
		if n := st.ByKeyModel[key+"|m0"] + st.ByKeyModel[key+"|m1"]; n != 2*calls {
			t.Errorf("%s per model = %d", key, n)
		}
	}
}

func TestStatsAndResetEndpoints(t *testing.T) {
	m := startMock(t, "")
	for i := 0; i < 3; i++ {
		m.post("/v1/chat/completions", "k1", chatBody("m", "hi", false, false))
	}
	resp, err := m.do(context.Background(), http.MethodGet, "/_mock/stats", "", "")
	if err != nil {
		t.Fatal(err)
	}
	var st Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if st.Total != 3 || st.ByKey["k1"].Completed != 3 || st.ByKeyModel["k1|m"] != 3 {
		t.Errorf("GET /_mock/stats = %+v", st)
	}
	if status, _, _ := m.post("/_mock/reset", "", ""); status != 200 {
		t.Fatalf("reset status %d", status)
	}
	if st := m.srv.Stats(); st.Total != 0 || len(st.ByKey) != 0 || len(st.ByKeyModel) != 0 || st.MaxConcurrent != 0 {
		t.Errorf("after reset = %+v", st)
	}
	if status, _, _ := m.post("/_mock/stats", "", ""); status != http.StatusMethodNotAllowed {
		t.Errorf("POST /_mock/stats = %d, want 405", status)
	}
	// Control calls are not counted.
	if st := m.srv.Stats(); st.Total != 0 {
		t.Errorf("control calls counted: %+v", st)
	}
}
