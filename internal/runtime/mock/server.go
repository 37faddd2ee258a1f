// Package mock is the fault-injecting upstream used by the demo, the
// end-to-end tests and the benchmarks. It speaks the OpenAI Chat Completions,
// Anthropic Messages and (minimal) OpenAI Responses wire formats, streaming
// and not, on plain net/http, plus count_tokens, embeddings and legacy
// completions. By default it echoes the last user message (or, with
// answer_tools, answers tool calls so an agent loop completes); a
// Script injects statuses, latency, stalls, resets, slow trickles, error
// events and keep-alives per key, model, path and request header. It also
// serves the Claude account endpoints of the usage wall (the usage probe and
// the session-limit reset claim). Control endpoints under
// /_mock/ replace the script and read or reset the call counters.
package mock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// maxScriptBytes bounds the body of POST /_mock/script.
const maxScriptBytes = 1 << 20

// maxRequestBytes bounds the body of a generation request.
const maxRequestBytes = 32 << 20

// Server is the mock upstream. All methods are goroutine-safe. Construct it
// with New; serve its Handler yourself or call Start; Close ends it.
type Server struct {
	logger hclog.Logger
	prog   atomic.Pointer[program]
	stats  atomic.Pointer[book]
	quit   chan struct{}

	idPrefix string
	idSeq    atomic.Uint64

	mu       sync.Mutex // guards httpSrv and closed
	httpSrv  *http.Server
	closed   bool
	quitOnce sync.Once

	handler http.Handler
	bufs    sync.Pool // *[]byte scratch buffers, one per call
}

// New returns a Server answering with script (nil means the echo default for
// every call). It starts nothing. logger may be nil.
func New(script *Script, logger hclog.Logger) *Server {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &Server{
		logger: logger.Named("mock"),
		quit:   make(chan struct{}),
	}
	s.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	s.idPrefix = strconv.FormatInt(time.Now().UnixNano()&0xffffffffff, 36)
	s.prog.Store(compile(script))
	s.stats.Store(newBook())
	s.handler = http.HandlerFunc(s.route)
	return s
}

// Handler returns the mock's HTTP handler, for httptest or an embedding
// server. It panics with http.ErrAbortHandler to cut a stream mid-body
// (reset_after_chunks), so do not wrap it in a recovering middleware.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on addr ("127.0.0.1:0" picks a free port; "" means that) and
// serves in the background. It returns the bound address. A Server can be
// started once.
func (s *Server) Start(addr string) (string, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errors.New("mock: start: server is closed")
	}
	if s.httpSrv != nil {
		return "", errors.New("mock: start: already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("mock: listen on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog: s.logger.StandardLogger(&hclog.StandardLoggerOptions{
			ForceLevel: hclog.Debug,
		}),
	}
	s.httpSrv = srv
	bound := ln.Addr().String()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("serve failed", "addr", bound, "error", err)
		}
	}()
	s.logger.Info("mock upstream listening", "addr", bound)
	return bound, nil
}

// Close stops the listener (if started), drops every connection and ends
// every waiting or stalled answer. It is idempotent.
func (s *Server) Close() error {
	s.quitOnce.Do(func() { close(s.quit) })
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.httpSrv == nil {
		return nil
	}
	srv := s.httpSrv
	s.httpSrv = nil
	if err := srv.Close(); err != nil {
		return fmt.Errorf("mock: close: %w", err)
	}
	return nil
}

// SetScript replaces the script; rule positions and random generators start
// afresh. nil means no rules. Calls already being answered keep their step.
func (s *Server) SetScript(script *Script) {
	s.prog.Store(compile(script))
	n := 0
	if script != nil {
		n = len(script.Rules)
	}
	s.logger.Info("mock script replaced", "rules", n)
}

// Stats returns a snapshot of the call counters.
func (s *Server) Stats() Stats { return s.stats.Load().snapshot() }

// ResetStats zeroes every counter. Calls in flight at the reset finish in
// the old counters and are not visible in the new ones.
func (s *Server) ResetStats() { s.stats.Store(newBook()) }

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/chat/completions":
		s.generation(w, r, wireOpenAI)
	case "/v1/messages":
		s.generation(w, r, wireAnthropic)
	case "/v1/responses":
		s.generation(w, r, wireResponses)
	case "/v1/messages/count_tokens":
		s.generation(w, r, wireCountTokens)
	case "/v1/embeddings":
		s.generation(w, r, wireEmbeddings)
	case "/v1/completions":
		s.generation(w, r, wireCompletions)
	case "/v1/models":
		if !allowMethod(w, r, http.MethodGet) {
			return
		}
		s.models(w, r)
	case "/_mock/script":
		if !allowMethod(w, r, http.MethodPost) {
			return
		}
		s.postScript(w, r)
	case "/_mock/stats":
		if !allowMethod(w, r, http.MethodGet) {
			return
		}
		writeJSON(w, http.StatusOK, s.Stats())
	case "/_mock/reset":
		if !allowMethod(w, r, http.MethodPost) {
			return
		}
		s.ResetStats()
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	case "/_mock/health":
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	case usagePath:
		s.usageProbe(w, r)
	default:
		if _, ok := resetOrg(r.URL.Path); ok {
			s.resetClaim(w, r)
			return
		}
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{
			"message": "Unknown request URL: " + r.Method + " " + r.URL.Path + ".",
			"type":    "invalid_request_error",
			"param":   nil,
			"code":    "unknown_url",
		}})
	}
}

func allowMethod(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method {
		return true
	}
	w.Header().Set("Allow", method)
	writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": map[string]any{
		"message": "Method " + r.Method + " not allowed; use " + method + ".",
		"type":    "invalid_request_error",
	}})
	return false
}

func (s *Server) postScript(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxScriptBytes+1))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorJSON("read script: "+err.Error()))
		return
	}
	if len(data) > maxScriptBytes {
		writeJSON(w, http.StatusRequestEntityTooLarge, errorJSON("script exceeds 1 MiB"))
		return
	}
	script, err := ParseScript(data)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorJSON(err.Error()))
		return
	}
	s.SetScript(script)
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "rules": len(script.Rules)})
}

func errorJSON(msg string) map[string]any {
	return map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	ids := s.prog.Load().script.Models
	if len(ids) == 0 {
		ids = DefaultModels()
	}
	const created = 1700000000
	if r.Header.Get("anthropic-version") != "" {
		data := make([]map[string]any, len(ids))
		for i, id := range ids {
			data[i] = map[string]any{"type": "model", "id": id, "display_name": id,
				"created_at": time.Unix(created, 0).UTC().Format(time.RFC3339)}
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": false,
			"first_id": ids[0], "last_id": ids[len(ids)-1]})
		return
	}
	data := make([]map[string]any, len(ids))
	for i, id := range ids {
		data[i] = map[string]any{"id": id, "object": "model", "created": created, "owned_by": "breakwater-mock"}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, "encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// newID returns a unique, realistic-looking id with the given prefix.
func (s *Server) newID(prefix string) string {
	n := s.idSeq.Add(1)
	b := make([]byte, 0, len(prefix)+24)
	b = append(b, prefix...)
	b = append(b, s.idPrefix...)
	b = strconv.AppendUint(b, n+1<<40, 36)
	return string(b)
}
