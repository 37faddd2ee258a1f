// Package compat is the compatibility suite: the real client SDKs and
// coding agents (installed by npm from compat/package-lock.json) against
// `breakwater serve` in front of `breakwater mock`, one OpenAI-kind and one
// Anthropic-kind provider. It writes the matrix of docs/compatibility.md
// (go test ./compat -update, or make compat-docs).
package compat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the generated matrix in docs/compatibility.md")

// The provider kinds of the gateway under test and the model each client
// addresses there. Agents use bare model ids their client recognises, so
// they send their newest request shapes.
const (
	kindOpenAI    = "openai"
	kindAnthropic = "anthropic"
)

var sdkModel = map[string]string{kindOpenAI: "oa/gpt-4o-mini", kindAnthropic: "an/claude-haiku-4-5"}

// agentModel is the model an agent asks for on each provider kind.
var agentModel = map[string]map[string]string{
	"claude-code": {kindOpenAI: "claude-opus-5-5", kindAnthropic: "claude-sonnet-5-5"},
	"codex":       {kindOpenAI: "gpt-5.2", kindAnthropic: "gpt-5.2-codex", previewAnthropic: "gpt-5.2", previewChat: "gpt-5.2"},
}

// The translator preview's targets: the Responses translators behind a
// test shim (shim_test.go) in front of the mock's Messages and Chat
// Completions endpoints.
const (
	previewAnthropic = "preview-anthropic"
	previewChat      = "preview-chat"
)

var previewName = map[string]string{
	previewAnthropic: "Anthropic Messages upstream",
	previewChat:      "Chat Completions upstream",
}

var previewClients = []client{
	{id: "openai-responses", name: "`openai` responses", format: "Responses"},
	{id: "ai-openai-responses", name: "`ai` + `@ai-sdk/openai` .responses()", format: "Responses"},
	{id: "codex", name: "Codex CLI (`codex exec`)", format: "Responses", agent: true},
}

const gatewayConfig = `server:
  listen: %s
state:
  backend: memory
providers:
  - id: oa
    kind: openai
    base_url: %s/v1
    models: [gpt-4o-mini, text-embedding-3-small, gpt-5.2, claude-opus-5-5]
    connections:
      - {id: k1, api_key: sk-mock-openai}
  - id: an
    kind: anthropic
    base_url: %s/v1
    models: [claude-haiku-4-5, claude-sonnet-5-5, gpt-5.2-codex]
    connections:
      - {id: k1, api_key: sk-mock-anthropic}
`

// client is one client of the matrix.
type client struct {
	id, name, format string
	agent            bool
}

var sdkClients = []client{
	{id: "openai-chat", name: "`openai` chat.completions", format: "Chat Completions"},
	{id: "openai-responses", name: "`openai` responses", format: "Responses"},
	{id: "anthropic-sdk", name: "`@anthropic-ai/sdk` messages", format: "Messages"},
	{id: "ai-openai-chat", name: "`ai` + `@ai-sdk/openai` .chat()", format: "Chat Completions"},
	{id: "ai-openai-responses", name: "`ai` + `@ai-sdk/openai` .responses()", format: "Responses"},
	{id: "ai-anthropic", name: "`ai` + `@ai-sdk/anthropic`", format: "Messages"},
}

var agents = []client{
	{id: "claude-code", name: "Claude Code (`claude -p`)", format: "Messages", agent: true},
	{id: "codex", name: "Codex CLI (`codex exec`)", format: "Responses", agent: true},
}

var scenarios = []string{"text", "tools", "image"}

// cell is one check of the matrix.
type cell struct {
	ID       string `json:"id"`
	Client   string `json:"client"`
	Kind     string `json:"kind,omitempty"`
	Model    string `json:"model,omitempty"`
	Stream   bool   `json:"stream"`
	Scenario string `json:"scenario"`
	// Base is the URL the cell's clients call; empty means the gateway.
	Base string `json:"base,omitempty"`
}

// endpoint cells: one check each.
type endpointCell struct {
	cell
	what string
}

var endpointCells = []endpointCell{
	{cell{ID: "models_openai", Client: "endpoints", Scenario: "models_openai"}, "`openai` models.list (GET /v1/models)"},
	{cell{ID: "models_anthropic", Client: "endpoints", Scenario: "models_anthropic"}, "`@anthropic-ai/sdk` models.list (GET /v1/models, Anthropic shape)"},
	{cell{ID: "count_tokens_anthropic", Client: "anthropic-sdk", Kind: kindAnthropic, Model: sdkModel[kindAnthropic], Scenario: "count_tokens"}, "`@anthropic-ai/sdk` messages.countTokens → Anthropic kind (forwarded)"},
	{cell{ID: "count_tokens_openai", Client: "anthropic-sdk", Kind: kindOpenAI, Model: sdkModel[kindOpenAI], Scenario: "count_tokens"}, "`@anthropic-ai/sdk` messages.countTokens → OpenAI kind (estimated)"},
	{cell{ID: "embeddings", Client: "endpoints", Kind: kindOpenAI, Model: "oa/text-embedding-3-small", Scenario: "embeddings"}, "`openai` embeddings.create → OpenAI kind"},
	{cell{ID: "completions", Client: "endpoints", Kind: kindOpenAI, Model: sdkModel[kindOpenAI], Scenario: "completions"}, "`openai` completions.create (legacy) → OpenAI kind"},
	{cell{ID: "completions_stream", Client: "endpoints", Kind: kindOpenAI, Model: sdkModel[kindOpenAI], Stream: true, Scenario: "completions"}, "`openai` completions.create (legacy, stream) → OpenAI kind"},
	{cell{ID: "oversize", Client: "endpoints", Kind: kindOpenAI, Model: sdkModel[kindOpenAI], Scenario: "oversize"}, "`openai` chat with an 11 MiB body → 413 with its JSON error"},
	{cell{ID: "not_found_openai", Client: "endpoints", Scenario: "not_found_openai"}, "`openai` unknown model → 404 `model_not_found`"},
	{cell{ID: "not_found_anthropic", Client: "endpoints", Scenario: "not_found_anthropic"}, "`@anthropic-ai/sdk` unknown model → 404 in the Anthropic error shape"},
	{cell{ID: "stateless_anthropic", Client: "openai-responses", Kind: kindAnthropic, Model: sdkModel[kindAnthropic], Scenario: "stateless"}, "`openai` responses with `previous_response_id` → Anthropic kind: 400 naming the field"},
}

// Pending reasons: what phase 2 (the request path's adapter entries and
// handlers) must wire. A pending cell that passes fails the suite, so the
// table is flipped when phase 2 lands.
const (
	pendResponses = "phase 2: Responses API → Anthropic kind (wire `ParseResponses` + `AnthropicRequest` / `AnthropicResponse` / `NewAnthropicStream`)"
	pendCount     = "phase 2: `POST /v1/messages/count_tokens` handler (forward to Anthropic kind; `translate.CountTokens` for others)"
	pendEmbed     = "phase 2: `POST /v1/embeddings` handler (OpenAI kind, routed and failed over like chat)"
	pendCompl     = "phase 2: `POST /v1/completions` handler (legacy, OpenAI kind only)"
	pendModels    = "phase 2: `GET /v1/models` in the Anthropic shape when the request carries `anthropic-version`"
	pendOversize  = "phase 2: 413 before the body is read (drain a bounded amount or answer `Expect`); today the SDK often sees `Connection error.` instead (12 tries must all get the 413)"
)

// pending maps a cell id (client|kind|stream|scenario, or an endpoint id)
// to the reason it does not pass yet.
func pending() map[string]string {
	p := map[string]string{
		"count_tokens_anthropic":        pendCount,
		"count_tokens_openai":           pendCount,
		"embeddings":                    pendEmbed,
		"completions":                   pendCompl,
		"completions_stream":            pendCompl,
		"models_anthropic":              pendModels,
		"oversize":                      pendOversize,
		"stateless_anthropic":           pendResponses,
		agentID("codex", kindAnthropic): pendResponses,
	}
	for _, c := range []string{"openai-responses", "ai-openai-responses"} {
		for _, stream := range []bool{false, true} {
			for _, sc := range scenarios {
				p[cellID(c, kindAnthropic, stream, sc)] = pendResponses
			}
		}
	}
	return p
}

func cellID(client, kind string, stream bool, scenario string) string {
	return fmt.Sprintf("%s|%s|%v|%s", client, kind, stream, scenario)
}

func agentID(agent, kind string) string { return cellID(agent, kind, true, "tools") }

// result is the outcome of a cell.
type result struct {
	ID     string `json:"id"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

func TestCompatibility(t *testing.T) {
	if _, err := os.Stat(filepath.Join("node_modules", ".package-lock.json")); err != nil {
		if os.Getenv("BREAKWATER_COMPAT") == "1" {
			t.Fatalf("compat/node_modules is missing: run npm ci in compat/ (make test does): %v", err)
		}
		t.Skip("compat/node_modules is missing: run `npm ci` in compat/ (make test does)")
	}
	start := time.Now()
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	mockAddr, gwAddr := freeAddr(t), freeAddr(t)
	scriptPath := filepath.Join(dir, "mock.yaml")
	writeFile(t, scriptPath, "answer_tools: true\n")
	startProcess(t, "mock", bin, "mock", "--listen", mockAddr, "--script", scriptPath)
	waitReady(t, "http://"+mockAddr+"/_mock/health")
	shims := map[string]string{
		previewAnthropic: startShim(t, "http://"+mockAddr, shimAnthropic),
		previewChat:      startShim(t, "http://"+mockAddr, shimChat),
	}
	cfgPath := filepath.Join(dir, "breakwater.yaml")
	writeFile(t, cfgPath, fmt.Sprintf(gatewayConfig, gwAddr, "http://"+mockAddr, "http://"+mockAddr))
	startProcess(t, "serve", bin, "serve", "--config", cfgPath)
	gw := "http://" + gwAddr
	waitReady(t, gw+"/v1/models")

	var cells []cell
	for _, c := range sdkClients {
		for _, kind := range []string{kindOpenAI, kindAnthropic} {
			for _, stream := range []bool{false, true} {
				for _, sc := range scenarios {
					cells = append(cells, cell{ID: cellID(c.id, kind, stream, sc), Client: c.id, Kind: kind, Model: sdkModel[kind], Stream: stream, Scenario: sc})
				}
			}
		}
	}
	for _, e := range endpointCells {
		cells = append(cells, e.cell)
	}
	for _, c := range previewClients {
		if c.agent {
			continue
		}
		for _, kind := range []string{previewAnthropic, previewChat} {
			for _, stream := range []bool{false, true} {
				for _, sc := range scenarios {
					cells = append(cells, cell{ID: cellID(c.id, kind, stream, sc), Client: c.id, Kind: kind, Model: "claude-haiku-4-5", Stream: stream, Scenario: sc, Base: shims[kind]})
				}
			}
		}
	}
	cells = append(cells, cell{ID: "stateless_preview", Client: "openai-responses", Kind: previewAnthropic, Model: "claude-haiku-4-5", Scenario: "stateless", Base: shims[previewAnthropic]})

	results := map[string]result{}
	var mu sync.Mutex
	record := func(r result) {
		mu.Lock()
		results[r.ID] = r
		mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, r := range runSDK(t, dir, gw, cells) {
			record(r)
		}
	}()
	for _, a := range agents {
		for _, kind := range []string{kindOpenAI, kindAnthropic} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				record(runAgent(t, dir, gw, a.id, kind))
			}()
		}
	}
	for _, kind := range []string{previewAnthropic, previewChat} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			record(runAgent(t, dir, shims[kind], "codex", kind))
		}()
	}
	wg.Wait()

	pend := pending()
	ids := make([]string, 0, len(results))
	for id := range results {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, c := range cells {
		if _, ok := results[c.ID]; !ok {
			t.Errorf("%s: no result from the SDK runner", c.ID)
		}
	}
	passed, pendingN := 0, 0
	for _, id := range ids {
		r := results[id]
		reason, isPending := pend[id]
		switch {
		case r.OK && isPending:
			t.Errorf("%s now passes: remove it from pending() (%s)", id, reason)
		case r.OK:
			passed++
		case isPending:
			pendingN++
			t.Logf("pending %s: %s", id, r.Detail)
		default:
			t.Errorf("%s fails: %s", id, r.Detail)
		}
	}
	t.Logf("%d cells: %d pass, %d pending phase 2, %d fail; %s", len(ids), passed, pendingN, len(ids)-passed-pendingN, time.Since(start).Round(100*time.Millisecond))

	doc := filepath.Join("..", "docs", "compatibility.md")
	matrix := renderMatrix(results, pend)
	if *update {
		if err := replaceGenerated(doc, matrix); err != nil {
			t.Fatal(err)
		}
		return
	}
	current, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(current, []byte(matrix)) && !t.Failed() {
		t.Errorf("docs/compatibility.md is not current: run make compat-docs")
	}
}

// buildBinary builds cmd/breakwater into dir.
func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "breakwater")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/breakwater")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startProcess runs a long-lived process until the test ends; its output
// is logged when the test fails.
func startProcess(t *testing.T, name, bin string, args ...string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, tail(out.String(), 4000))
		}
	})
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func waitReady(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runSDK runs the SDK cells in one Node process (sdk.mjs).
func runSDK(t *testing.T, dir, gw string, cells []cell) []result {
	path := filepath.Join(dir, "cells.json")
	b, err := json.Marshal(cells)
	if err != nil {
		t.Error(err)
		return nil
	}
	writeFile(t, path, string(b))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "sdk.mjs", path)
	cmd.Env = append(os.Environ(), "BREAKWATER_URL="+gw)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Errorf("sdk.mjs: %v\n%s", err, tail(stderr.String(), 4000))
	}
	var rs []result
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Errorf("sdk.mjs printed %q: %v", sc.Text(), err)
			continue
		}
		rs = append(rs, r)
	}
	return rs
}

// The agents read a file through their own tool, in a scratch directory.
const (
	agentFileText = "hello from the file"
	agentTimeout  = 2 * time.Minute
)

// runAgent runs one coding agent turn (print/exec mode) against the
// gateway: the mock calls the agent's read tool on notes.txt, the agent
// runs it and sends the result back, and the final answer must quote it.
func runAgent(t *testing.T, dir, base, agent, kind string) result {
	id := agentID(agent, kind)
	home := filepath.Join(dir, agent+"-"+kind)
	work := filepath.Join(home, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return result{ID: id, Detail: err.Error()}
	}
	notes := filepath.Join(work, "notes.txt")
	if err := os.WriteFile(notes, []byte(agentFileText+"\n"), 0o644); err != nil {
		return result{ID: id, Detail: err.Error()}
	}
	model := agentModel[agent][kind]
	prompt := "Read the file " + notes + " and quote it."
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8"}
	var cmd *exec.Cmd
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	switch agent {
	case "claude-code":
		cmd = exec.CommandContext(ctx, filepath.Join(mustAbs(t, "node_modules"), ".bin", "claude"),
			"-p", prompt, "--output-format", "json", "--model", model)
		env = append(env, "ANTHROPIC_BASE_URL="+base, "ANTHROPIC_API_KEY=sk-compat",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1")
	case "codex":
		conf := "model_provider = \"breakwater\"\n"
		if kind != kindOpenAI {
			// OpenAI's hosted web search has no stateless translation.
			conf = "web_search = \"disabled\"\n" + conf
		}
		conf += "\n[model_providers.breakwater]\nname = \"breakwater\"\nbase_url = \"" + base + "/v1\"\nenv_key = \"BREAKWATER_KEY\"\nwire_api = \"responses\"\n"
		if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(conf), 0o644); err != nil {
			return result{ID: id, Detail: err.Error()}
		}
		cmd = exec.CommandContext(ctx, filepath.Join(mustAbs(t, "node_modules"), ".bin", "codex"),
			"exec", "--skip-git-repo-check", "-m", model, prompt)
		env = append(env, "CODEX_HOME="+home, "BREAKWATER_KEY=sk-compat")
	}
	cmd.Dir, cmd.Env = work, env
	out, err := cmd.CombinedOutput()
	text := string(out)
	want := `The tool returned: "`
	switch agent {
	case "claude-code":
		var doc struct {
			IsError  bool   `json:"is_error"`
			Result   string `json:"result"`
			NumTurns int    `json:"num_turns"`
		}
		if jerr := json.Unmarshal(bytes.TrimSpace(out), &doc); jerr == nil {
			text = doc.Result
			if doc.IsError || doc.NumTurns < 2 {
				return result{ID: id, Detail: fmt.Sprintf("is_error %v after %d turns: %s", doc.IsError, doc.NumTurns, tail(doc.Result, 300))}
			}
		}
	}
	if err != nil || !strings.Contains(text, want) || !strings.Contains(text, agentFileText) {
		return result{ID: id, Detail: fmt.Sprintf("%v: %s", err, strings.Join(strings.Fields(tail(text, 400)), " "))}
	}
	return result{ID: id, OK: true}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Error(err)
	}
	return a
}

// The generated part of docs/compatibility.md lies between these markers.
const (
	beginMarker = "<!-- BEGIN GENERATED MATRIX (go test ./compat -update) -->"
	endMarker   = "<!-- END GENERATED MATRIX -->"
)

func mark(r result, ok bool, pendingReason string, notes map[string]int) string {
	switch {
	case !ok:
		return "—"
	case r.OK:
		return "✅"
	case pendingReason != "":
		if _, seen := notes[pendingReason]; !seen {
			notes[pendingReason] = len(notes) + 1
		}
		return fmt.Sprintf("⏳<sup>%d</sup>", notes[pendingReason])
	}
	return "❌"
}

// renderMatrix renders the results as Markdown tables.
func renderMatrix(results map[string]result, pend map[string]string) string {
	notes := map[string]int{}
	var b strings.Builder
	b.WriteString(beginMarker + "\n\n")
	b.WriteString("✅ passes · ⏳ pending phase 2 (the reason is in the notes) · — not applicable (agents always stream and always offer tools)\n\n")
	renderClients(&b, "provider kind", append(append([]client{}, sdkClients...), agents...), []string{kindOpenAI, kindAnthropic},
		func(kind string) string { return kind }, results, pend, notes)
	b.WriteString("\nTranslator preview: the Responses translators of `internal/runtime/translate` behind a test shim (no routing) in front of the mock — what phase 2 wires into the request path.\n\n")
	renderClients(&b, "upstream", previewClients, []string{previewAnthropic, previewChat},
		func(kind string) string { return previewName[kind] }, results, pend, notes)
	r, ok := results["stateless_preview"]
	fmt.Fprintf(&b, "\n`openai` responses with `previous_response_id` → Anthropic Messages upstream: 400 naming the field: %s\n", mark(r, ok, pend["stateless_preview"], notes))
	b.WriteString("\n| endpoint check | result |\n|---|---|\n")
	for _, e := range endpointCells {
		r, ok := results[e.ID]
		fmt.Fprintf(&b, "| %s | %s |\n", e.what, mark(r, ok, pend[e.ID], notes))
	}
	if len(notes) > 0 {
		byN := make([]string, len(notes))
		for reason, n := range notes {
			byN[n-1] = reason
		}
		b.WriteString("\nNotes:\n\n")
		for i, reason := range byN {
			fmt.Fprintf(&b, "%d. %s\n", i+1, reason)
		}
	}
	b.WriteString("\n" + endMarker)
	return b.String()
}

// renderClients writes one table row per client and kind: the scenarios,
// non-streaming then streaming ("—" where an agent cannot run them).
func renderClients(b *strings.Builder, kindHeader string, clients []client, kinds []string, label func(string) string,
	results map[string]result, pend map[string]string, notes map[string]int) {
	fmt.Fprintf(b, "| client | client format | %s | text | tools | image | text (stream) | tools (stream) | image (stream) |\n", kindHeader)
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range clients {
		for _, kind := range kinds {
			fmt.Fprintf(b, "| %s | %s | %s |", c.name, c.format, label(kind))
			for _, stream := range []bool{false, true} {
				for _, sc := range scenarios {
					id := cellID(c.id, kind, stream, sc)
					if c.agent && !(stream && sc == "tools") {
						b.WriteString(" — |")
						continue
					}
					r, ok := results[id]
					fmt.Fprintf(b, " %s |", mark(r, ok, pend[id], notes))
				}
			}
			b.WriteString("\n")
		}
	}
}

// replaceGenerated writes matrix between the markers of path.
func replaceGenerated(path, matrix string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(doc)
	i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
	if i < 0 || j < i {
		return fmt.Errorf("%s: the generated-matrix markers are missing", path)
	}
	out := s[:i] + matrix + s[j+len(endMarker):]
	return os.WriteFile(path, []byte(out), 0o644)
}
