package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// benchClient posts a small chat completion to url in a loop; the direct
// call to the mock and the call through the gateway use it alike, so their
// ratio is the gateway's cost.
func benchPost(b *testing.B, url, model string) {
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"hello there"}]}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(url, "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
}

// BenchmarkDirectMock is the baseline: the mock called directly.
func BenchmarkDirectMock(b *testing.B) {
	h := start(b, baseConfig)
	defer h.stopGateway()
	benchPost(b, h.mockURL()+"/v1/chat/completions", "m1")
}

// BenchmarkGatewayNonStream is the same call through the gateway.
func BenchmarkGatewayNonStream(b *testing.B) {
	h := start(b, baseConfig)
	defer h.stopGateway()
	benchPost(b, h.url+"/v1/chat/completions", "alpha/m1")
}
