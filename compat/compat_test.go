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
	// kindChatOnly is an OpenAI-kind provider without the Responses API
	// (responses_api: translate): Responses clients reach its Chat
	// Completions endpoint through the translators.
	kindChatOnly = "openai-translate"
)

var kindName = map[string]string{kindOpenAI: "openai", kindAnthropic: "anthropic", kindChatOnly: "openai, `responses_api: translate`"}

var sdkModel = map[string]string{kindOpenAI: "oa/gpt-4o-mini", kindAnthropic: "an/claude-haiku-4-5", kindChatOnly: "oc/gpt-4o-mini"}

// agentModel is the model an agent asks for on each provider kind (a
// bare model only that provider lists).
var agentModel = map[string]map[string]string{
	"claude-code": {kindOpenAI: "claude-opus-5-5", kindAnthropic: "claude-sonnet-5-5"},
	"codex":       {kindOpenAI: "gpt-5.2", kindAnthropic: "gpt-5.2-codex", kindChatOnly: "gpt-5.1"},
}

// responsesClients are the clients of the Responses API, run against the
// provider without the Responses API too.
var responsesClients = []client{
	{id: "openai-responses", name: "`openai` responses", format: "Responses"},
	{id: "ai-openai-responses", name: "`ai` + `@ai-sdk/openai` .responses()", format: "Responses"},
	{id: "codex", name: "Codex CLI (`codex exec`)", format: "Responses", agent: true},
}

const gatewayConfig = `server:
  listen: %s
state:
  backend: memory
resilience:
  # The suite checks wire formats, not admission: no request spacing on
  # the one connection each kind has (every cell would queue behind it).
  request_queue: {auto_enable_api_key_providers: false}
providers:
  - id: oa
    kind: openai
    base_url: %s/v1
    models: [gpt-4o-mini, text-embedding-3-small, gpt-5.2, claude-opus-5-5,
             gpt-4o-mini-reasoning, gpt-4o-mini-structured, gpt-4o-mini-usage, gpt-4o-mini-length]
    connections:
      - {id: k1, api_key: sk-mock-openai}
  - id: an
    kind: anthropic
    base_url: %s/v1
    models: [claude-haiku-4-5, claude-sonnet-5-5, gpt-5.2-codex,
             claude-haiku-4-5-reasoning, claude-haiku-4-5-structured, claude-haiku-4-5-usage, claude-haiku-4-5-length]
    connections:
      - {id: k1, api_key: sk-mock-anthropic}
  - id: oc
    kind: openai
    responses_api: translate
    base_url: %s/v1
    models: [gpt-4o-mini, gpt-5.1, gpt-4o-mini-reasoning, gpt-4o-mini-structured, gpt-4o-mini-usage, gpt-4o-mini-length]
    connections:
      - {id: k1, api_key: sk-mock-chat}
`

// mockScript answers tool calls (agents and the tools scenario) and the
// detail scenarios by model name (sdk.mjs sends model + "-" + scenario):
// reasoning before the text, a JSON answer, cached prompt tokens, an
// answer cut by the output token limit.
const mockScript = `answer_tools: true
rules:
  - {model: "*-reasoning", responses: [{reasoning_chunks: 2, reasoning_text: "Thinking it through."}]}
  - {model: "*-structured", responses: [{text: '{"city":"Paris"}'}]}
  - {model: "*-usage", responses: [{cached_tokens: 3}]}
  - {model: "*-length", responses: [{truncated: true}]}
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

// detailScenarios are the other columns that real clients can
// exercise: reasoning / thinking, structured output (JSON schema), usage
// with cached tokens, and the stop reason of an answer cut by the output
// token limit.
var detailScenarios = []string{"reasoning", "structured", "usage", "length"}

var detailTitle = map[string]string{"reasoning": "reasoning", "structured": "structured output", "usage": "cached tokens", "length": "stop: length"}

// Reasons a cell cannot be exercised (shown — with a note).
const (
	naAgent         = "agents always stream and always offer tools"
	naMockResponses = "the mock's `/v1/responses` sends no reasoning items, and a native Responses route passes the upstream's through untouched (the Responses reasoning translation is exercised on the two other providers)"
	naAIChat        = "`@ai-sdk/openai` .chat() does not read `reasoning_content` (an OpenAI-compatible extension); the Chat Completions reasoning translation is checked with the `openai` client"
)

// notApplicable returns why a client cannot exercise a cell, or "".
func notApplicable(c client, kind, scenario string, stream bool) string {
	switch {
	case c.agent && !(stream && scenario == "tools"):
		return naAgent
	case scenario != "reasoning":
		return ""
	case c.id == "ai-openai-chat":
		return naAIChat
	case c.format == "Responses" && kind == kindOpenAI:
		return naMockResponses
	}
	return ""
}

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

// endpoint cells: one check each. A refusal cell passes when the client
// gets the documented 400 naming the field.
type endpointCell struct {
	cell
	what    string
	refusal bool
}

var endpointCells = []endpointCell{
	{cell{ID: "models_openai", Client: "endpoints", Scenario: "models_openai"}, "`openai` models.list (GET /v1/models)", false},
	{cell{ID: "models_anthropic", Client: "endpoints", Scenario: "models_anthropic"}, "`@anthropic-ai/sdk` models.list (GET /v1/models, Anthropic shape)", false},
	{cell{ID: "count_tokens_anthropic", Client: "anthropic-sdk", Kind: kindAnthropic, Model: sdkModel[kindAnthropic], Scenario: "count_tokens"}, "`@anthropic-ai/sdk` messages.countTokens → Anthropic kind (forwarded)", false},
	{cell{ID: "count_tokens_openai", Client: "anthropic-sdk", Kind: kindOpenAI, Model: sdkModel[kindOpenAI], Scenario: "count_tokens"}, "`@anthropic-ai/sdk` messages.countTokens → OpenAI kind (estimated)", false},
	{cell{ID: "embeddings", Client: "endpoints", Kind: kindOpenAI, Model: "oa/text-embedding-3-small", Scenario: "embeddings"}, "`openai` embeddings.create → OpenAI kind", false},
	{cell{ID: "completions", Client: "endpoints", Kind: kindOpenAI, Model: sdkModel[kindOpenAI], Scenario: "completions"}, "`openai` completions.create (legacy) → OpenAI kind", false},
	{cell{ID: "completions_stream", Client: "endpoints", Kind: kindOpenAI, Model: sdkModel[kindOpenAI], Stream: true, Scenario: "completions"}, "`openai` completions.create (legacy, stream) → OpenAI kind", false},
	{cell{ID: "oversize", Client: "endpoints", Kind: kindOpenAI, Model: sdkModel[kindOpenAI], Scenario: "oversize"}, "`openai` chat with an 11 MiB body → 413 with its JSON error", false},
	{cell{ID: "not_found_openai", Client: "endpoints", Scenario: "not_found_openai"}, "`openai` unknown model → 404 `model_not_found`", false},
	{cell{ID: "not_found_anthropic", Client: "endpoints", Scenario: "not_found_anthropic"}, "`@anthropic-ai/sdk` unknown model → 404 in the Anthropic error shape", false},
	{cell{ID: "stateless_anthropic", Client: "openai-responses", Kind: kindAnthropic, Model: sdkModel[kindAnthropic], Scenario: "stateless"}, "`openai` responses with `previous_response_id` → Anthropic kind: 400 naming the field", true},
	{cell{ID: "stateless_translate", Client: "openai-responses", Kind: kindChatOnly, Model: sdkModel[kindChatOnly], Scenario: "stateless"}, "`openai` responses with `previous_response_id` → OpenAI kind with `responses_api: translate`: 400 naming the field", true},
	{cell{ID: "json_object_anthropic", Client: "endpoints", Kind: kindAnthropic, Model: sdkModel[kindAnthropic], Scenario: "json_object"}, "`openai` chat with `response_format: json_object` → Anthropic kind: 400 naming `response_format.type`", true},
	{cell{ID: "hosted_tool_anthropic", Client: "endpoints", Kind: kindAnthropic, Model: sdkModel[kindAnthropic], Scenario: "hosted_tool"}, "`openai` responses with the hosted `web_search` tool → Anthropic kind: 400 naming `tools[0].type`", true},
	{cell{ID: "server_tool_openai", Client: "endpoints", Kind: kindOpenAI, Model: sdkModel[kindOpenAI], Scenario: "server_tool"}, "`@anthropic-ai/sdk` messages with the server tool `web_search_20250305` → OpenAI kind: 400 naming `tools[0].type`", true},
	{cell{ID: "embeddings_anthropic", Client: "endpoints", Kind: kindAnthropic, Model: sdkModel[kindAnthropic], Scenario: "embeddings_refused"}, "`openai` embeddings.create → Anthropic kind: 400 `wrong_endpoint`", true},
}

// pending maps a cell id (client|kind|stream|scenario, or an endpoint id)
// to the reason it is known not to pass yet. A pending cell that passes
// fails the suite, so the table is kept current. Empty: every cell passes
// (or gets its documented 400).
func pending() map[string]string {
	return map[string]string{}
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
	writeFile(t, scriptPath, mockScript)
	startProcess(t, "mock", bin, "mock", "--listen", mockAddr, "--script", scriptPath)
	waitReady(t, "http://"+mockAddr+"/_mock/health")
	cfgPath := filepath.Join(dir, "breakwater.yaml")
	writeFile(t, cfgPath, fmt.Sprintf(gatewayConfig, gwAddr, "http://"+mockAddr, "http://"+mockAddr, "http://"+mockAddr))
	startProcess(t, "serve", bin, "serve", "--config", cfgPath)
	gw := "http://" + gwAddr
	waitReady(t, gw+"/v1/models")

	var cells []cell
	for _, c := range sdkClients {
		for _, kind := range []string{kindOpenAI, kindAnthropic} {
			for _, stream := range []bool{false, true} {
				for _, sc := range append(append([]string{}, scenarios...), detailScenarios...) {
					if notApplicable(c, kind, sc, stream) != "" {
						continue
					}
					cells = append(cells, cell{ID: cellID(c.id, kind, stream, sc), Client: c.id, Kind: kind, Model: sdkModel[kind], Stream: stream, Scenario: sc})
				}
			}
		}
	}
	for _, e := range endpointCells {
		cells = append(cells, e.cell)
	}
	for _, c := range responsesClients {
		if c.agent {
			continue
		}
		for _, stream := range []bool{false, true} {
			for _, sc := range append(append([]string{}, scenarios...), detailScenarios...) {
				cells = append(cells, cell{ID: cellID(c.id, kindChatOnly, stream, sc), Client: c.id, Kind: kindChatOnly, Model: sdkModel[kindChatOnly], Stream: stream, Scenario: sc})
			}
		}
	}

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
	wg.Add(1)
	go func() {
		defer wg.Done()
		record(runAgent(t, dir, gw, "codex", kindChatOnly))
	}()
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
	refusal := map[string]bool{}
	for _, e := range endpointCells {
		refusal[e.ID] = e.refusal
	}
	passed, refused, pendingN := 0, 0, 0
	for _, id := range ids {
		r := results[id]
		reason, isPending := pend[id]
		switch {
		case r.OK && isPending:
			t.Errorf("%s now passes: remove it from pending() (%s)", id, reason)
		case r.OK && refusal[id]:
			refused++
		case r.OK:
			passed++
		case isPending:
			pendingN++
			t.Logf("pending %s: %s", id, r.Detail)
		default:
			t.Errorf("%s fails: %s", id, r.Detail)
		}
	}
	t.Logf("%d cells: %d pass, %d documented 400, %d pending, %d fail; %s", len(ids), passed, refused, pendingN, len(ids)-passed-refused-pendingN, time.Since(start).Round(100*time.Millisecond))

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

// note returns the footnote number of a reason, numbering new ones.
func note(notes map[string]int, reason string) int {
	if _, seen := notes[reason]; !seen {
		notes[reason] = len(notes) + 1
	}
	return notes[reason]
}

func mark(r result, ok bool, pendingReason string, notes map[string]int) string {
	switch {
	case !ok:
		return "—"
	case r.OK:
		return "✅"
	case pendingReason != "":
		return fmt.Sprintf("⏳<sup>%d</sup>", note(notes, pendingReason))
	}
	return "❌"
}

// renderMatrix renders the results as Markdown tables.
func renderMatrix(results map[string]result, pend map[string]string) string {
	notes := map[string]int{}
	var b strings.Builder
	b.WriteString(beginMarker + "\n\n")
	b.WriteString("✅ passes (for a refusal: the client gets the documented 400 naming the field) · ⏳ pending (the reason is in the notes) · — not applicable (the reason is in the notes)\n\n")
	kinds := []string{kindOpenAI, kindAnthropic}
	all := append(append([]client{}, sdkClients...), agents...)
	label := func(kind string) string { return kindName[kind] }
	renderClients(&b, "provider kind", all, kinds, scenarios, label, results, pend, notes)
	b.WriteString("\nThe issue's other columns, where the clients can exercise them: reasoning / thinking (the client asks for it and reads the reasoning text), structured output (a JSON schema; the client parses the JSON answer), usage with cached prompt tokens (3 cached tokens reported by the upstream reach the client's usage object), and the stop reason of an answer cut by the output token limit (`length`, `max_tokens`, `incomplete`).\n\n")
	renderClients(&b, "provider kind", sdkClients, kinds, detailScenarios, label, results, pend, notes)
	b.WriteString("\nThe Responses clients against an OpenAI-kind provider without the Responses API (`responses_api: translate`): translated to its Chat Completions endpoint and back.\n\n")
	renderClients(&b, "provider", responsesClients, []string{kindChatOnly}, append(append([]string{}, scenarios...), detailScenarios...), label, results, pend, notes)
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
// non-streaming then streaming ("—" with its note where a client cannot
// run one).
func renderClients(b *strings.Builder, kindHeader string, clients []client, kinds, scs []string, label func(string) string,
	results map[string]result, pend map[string]string, notes map[string]int) {
	fmt.Fprintf(b, "| client | client format | %s |", kindHeader)
	for _, suffix := range []string{"", " (stream)"} {
		for _, sc := range scs {
			title := detailTitle[sc]
			if title == "" {
				title = sc
			}
			fmt.Fprintf(b, " %s%s |", title, suffix)
		}
	}
	b.WriteString("\n|---|---|---|" + strings.Repeat("---|", 2*len(scs)) + "\n")
	for _, c := range clients {
		for _, kind := range kinds {
			fmt.Fprintf(b, "| %s | %s | %s |", c.name, c.format, label(kind))
			for _, stream := range []bool{false, true} {
				for _, sc := range scs {
					id := cellID(c.id, kind, stream, sc)
					if na := notApplicable(c, kind, sc, stream); na != "" {
						fmt.Fprintf(b, " —<sup>%d</sup> |", note(notes, na))
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
