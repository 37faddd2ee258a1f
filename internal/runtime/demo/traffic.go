package demo

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"
)

// TrafficInterval is the pause between two of the demo's background
// requests, TrafficLimit how many it sends at most (about an hour).
const (
	TrafficInterval = 1500 * time.Millisecond
	TrafficLimit    = 2400
)

// trafficRequests are the demo's background requests, sent in turn: a
// combo over the flaky provider, the demo combo streamed, a model of the
// demo provider and the Anthropic one.
var trafficRequests = []string{
	`{"model": "demo-resilient", "messages": [{"role": "user", "content": "demo traffic"}]}`,
	`{"model": "demo-combo", "stream": true, "messages": [{"role": "user", "content": "demo traffic"}]}`,
	`{"model": "demo/echo", "messages": [{"role": "user", "content": "demo traffic"}]}`,
	`{"model": "demo-resilient", "stream": true, "messages": [{"role": "user", "content": "demo traffic"}]}`,
	`{"model": "claude-echo", "messages": [{"role": "user", "content": "demo traffic"}]}`,
}

// Traffic sends the demo's background requests to the gateway at baseURL
// ("http://127.0.0.1:8080"), one every interval, until ctx ends or limit
// requests were sent. It returns how many it sent; once ctx has ended it
// sends nothing more. Answers are read and dropped; failures are what the
// demo is for, so none stops it.
func Traffic(ctx context.Context, baseURL string, interval time.Duration, limit int) int {
	client := &http.Client{Timeout: 30 * time.Second}
	t := time.NewTicker(max(interval, time.Millisecond))
	defer t.Stop()
	sent := 0
	for sent < limit && ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/chat/completions",
			strings.NewReader(trafficRequests[sent%len(trafficRequests)]))
		if err != nil {
			return sent
		}
		req.Header.Set("Content-Type", "application/json")
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		sent++
		// A ready tick and a cancelled ctx are picked at random by select:
		// the loop condition checks ctx again before the next request.
		select {
		case <-ctx.Done():
			return sent
		case <-t.C:
		}
	}
	return sent
}
