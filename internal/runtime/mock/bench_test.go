package mock

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// benchmarkLoopback measures whole calls (client included) over loopback.
func benchmarkLoopback(b *testing.B, path, body string) {
	srv := New(nil, nil)
	addr, err := srv.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	defer func() {
		_ = srv.Close()
		tr.CloseIdleConnections()
	}()
	client := &http.Client{Transport: tr}
	url := "http://" + addr + path
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer bench")
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}

func BenchmarkOpenAIEcho(b *testing.B) {
	benchmarkLoopback(b, "/v1/chat/completions", chatBody("gpt-4o", "hello world", false, false))
}

func BenchmarkOpenAIEchoStream(b *testing.B) {
	benchmarkLoopback(b, "/v1/chat/completions", chatBody("gpt-4o", "hello world", true, true))
}

func BenchmarkAnthropicEchoStream(b *testing.B) {
	benchmarkLoopback(b, "/v1/messages", messagesBody("claude-haiku-4", "hello world", true))
}

// BenchmarkHandlerStream measures the handler alone (no network, no client).
func BenchmarkHandlerStream(b *testing.B) {
	srv := New(nil, nil)
	defer srv.Close()
	h := srv.Handler()
	body := chatBody("gpt-4o", "hello world", true, true)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		req, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		w := discardWriter{h: http.Header{}}
		h.ServeHTTP(&w, req)
	}
}

type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Flush()                      {}
