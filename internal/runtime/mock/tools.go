package mock

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// Tool-call answers (script answer_tools: true): an agent loop through the
// mock completes. A request that offers tools and carries no tool result
// yet is answered with one call of a tool it offers, with arguments valid
// against that tool's schema; a request that carries a tool result is
// answered with text quoting the last result. See the README.

// toolCall is the tool call an answer makes.
type toolCall struct {
	id, itemID      string
	name, namespace string
	args            string
}

// roleContent is a chat or Messages message as tool planning reads it.
type roleContent struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// toolDef is a tool offered by the request.
type toolDef struct {
	name, namespace string
	schema          json.RawMessage
}

// preferredTools are picked first, in this order (case-insensitive): tools
// that only read, so a real agent runs them without asking.
var preferredTools = []string{"read", "read_file", "readfile", "view", "cat", "exec_command", "shell", "bash", "local_shell", "run_command"}

// maxQuote bounds the tool result quoted in the final answer.
const maxQuote = 2000

// toolPlan is what a request offering tools gets.
type toolPlan struct {
	call  *toolDef // the tool to call (nil: answer with text)
	quote string   // the last tool result, when there is one
	found bool     // a tool result is in the conversation
	user  string   // the last user text
}

// planTools reads the tools, the last tool result and the last user text
// of a request body in wire format wr. ok is false when the request offers
// no tools and carries no tool result.
func planTools(wr wire, body []byte) (p toolPlan, ok bool) {
	var tools []toolDef
	switch wr {
	case wireOpenAI:
		tools, p = chatTools(body)
	case wireAnthropic:
		tools, p = messagesTools(body)
	case wireResponses:
		tools, p = responsesTools(body)
	default:
		return p, false
	}
	if p.found {
		return p, true
	}
	if len(tools) == 0 {
		return p, false
	}
	p.call = pickTool(tools)
	return p, true
}

func pickTool(tools []toolDef) *toolDef {
	for _, want := range preferredTools {
		for i := range tools {
			if strings.EqualFold(tools[i].name, want) {
				return &tools[i]
			}
		}
	}
	return &tools[0]
}

// finalText is the answer quoting a tool result.
func finalText(result string) string {
	if len(result) > maxQuote {
		cut := maxQuote
		for cut > 0 && (result[cut]&0xC0) == 0x80 {
			cut--
		}
		result = result[:cut] + "…"
	}
	return "The tool returned: " + strconv.Quote(result)
}

func chatTools(body []byte) ([]toolDef, toolPlan) {
	var req struct {
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		Functions []struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"functions"`
		Messages []roleContent `json:"messages"`
	}
	var p toolPlan
	if json.Unmarshal(body, &req) != nil {
		return nil, p
	}
	var tools []toolDef
	for _, t := range req.Tools {
		if t.Type == "function" && t.Function.Name != "" {
			tools = append(tools, toolDef{name: t.Function.Name, schema: t.Function.Parameters})
		}
	}
	for _, f := range req.Functions {
		if f.Name != "" {
			tools = append(tools, toolDef{name: f.Name, schema: f.Parameters})
		}
	}
	for _, m := range req.Messages {
		switch m.Role {
		case "tool", "function":
			p.quote, p.found = contentText(m.Content), true
		case "user":
			p.user = contentText(m.Content)
		}
	}
	return tools, p
}

func messagesTools(body []byte) ([]toolDef, toolPlan) {
	var req struct {
		Tools []struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		Messages []roleContent `json:"messages"`
	}
	var p toolPlan
	if json.Unmarshal(body, &req) != nil {
		return nil, p
	}
	var tools []toolDef
	for _, t := range req.Tools {
		if (t.Type == "" || t.Type == "custom") && t.Name != "" {
			tools = append(tools, toolDef{name: t.Name, schema: t.InputSchema})
		}
	}
	for _, m := range req.Messages {
		if m.Role != "user" {
			continue
		}
		if len(m.Content) == 0 || m.Content[0] != '[' {
			p.user = contentText(m.Content)
			continue
		}
		var blocks []struct {
			Type    string          `json:"type"`
			Text    string          `json:"text"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		var text strings.Builder
		for _, b := range blocks {
			switch b.Type {
			case "tool_result":
				p.quote, p.found = contentText(b.Content), true
			case "text":
				text.WriteString(b.Text)
			}
		}
		if text.Len() > 0 {
			p.user = text.String()
		}
	}
	return tools, p
}

type rsToolDef struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
	Tools      []rsToolDef     `json:"tools"`
}

func responsesTools(body []byte) ([]toolDef, toolPlan) {
	var req struct {
		Tools []rsToolDef     `json:"tools"`
		Input json.RawMessage `json:"input"`
	}
	var p toolPlan
	if json.Unmarshal(body, &req) != nil {
		return nil, p
	}
	var tools []toolDef
	for _, t := range req.Tools {
		switch t.Type {
		case "function":
			tools = append(tools, toolDef{name: t.Name, schema: t.Parameters})
		case "namespace":
			for _, f := range t.Tools {
				if f.Type == "function" {
					tools = append(tools, toolDef{name: f.Name, namespace: t.Name, schema: f.Parameters})
				}
			}
		}
	}
	if len(req.Input) > 0 && req.Input[0] == '"' {
		p.user = contentText(req.Input)
		return tools, p
	}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Output  json.RawMessage `json:"output"`
	}
	if json.Unmarshal(req.Input, &items) != nil {
		return tools, p
	}
	for _, it := range items {
		switch {
		case it.Type == "function_call_output":
			p.quote, p.found = contentText(it.Output), true
		case it.Role == "user":
			p.user = contentText(it.Content)
		}
	}
	return tools, p
}

var (
	absPath  = regexp.MustCompile(`(?:^|[\s"'(])(/[^\s"'()<>]+)`)
	fileName = regexp.MustCompile(`\b[\w.-]+\.[A-Za-z0-9]{1,5}\b`)
)

// pathIn is the first absolute path in text, else the first file name,
// else "README.md".
func pathIn(text string) string {
	if m := absPath.FindStringSubmatch(text); m != nil {
		return strings.TrimRight(m[1], ".,;:")
	}
	if m := fileName.FindString(text); m != "" {
		return m
	}
	return "README.md"
}

// schemaNode is the part of a JSON schema argument generation reads.
type schemaNode struct {
	Type             json.RawMessage        `json:"type"`
	Properties       map[string]*schemaNode `json:"properties"`
	Required         []string               `json:"required"`
	Enum             []json.RawMessage      `json:"enum"`
	Const            json.RawMessage        `json:"const"`
	Items            *schemaNode            `json:"items"`
	MinItems         int                    `json:"minItems"`
	Minimum          *float64               `json:"minimum"`
	ExclusiveMinimum *float64               `json:"exclusiveMinimum"`
	AnyOf            []*schemaNode          `json:"anyOf"`
	OneOf            []*schemaNode          `json:"oneOf"`
}

// typ is the schema's type, the first non-null one of a type list.
func (n *schemaNode) typ() string {
	if len(n.Type) == 0 {
		if len(n.Properties) > 0 {
			return "object"
		}
		return ""
	}
	if n.Type[0] == '"' {
		var s string
		_ = json.Unmarshal(n.Type, &s)
		return s
	}
	var list []string
	_ = json.Unmarshal(n.Type, &list)
	for _, s := range list {
		if s != "null" {
			return s
		}
	}
	return ""
}

// toolArgs builds arguments for schema: every required property gets a
// value of its type (enum and const first; a path-like or command-like
// string names the path found in the user's text).
func toolArgs(schema json.RawMessage, user string) string {
	var n schemaNode
	if len(schema) == 0 || json.Unmarshal(schema, &n) != nil {
		return "{}"
	}
	b, err := json.Marshal(argValue(&n, "", pathIn(user), 0))
	if err != nil || len(b) == 0 || b[0] != '{' {
		return "{}"
	}
	return string(b)
}

func argValue(n *schemaNode, name, path string, depth int) any {
	if depth > 8 {
		return nil
	}
	if len(n.Const) > 0 {
		return n.Const
	}
	if len(n.Enum) > 0 {
		return n.Enum[0]
	}
	if alt := append(n.AnyOf, n.OneOf...); len(alt) > 0 && n.typ() == "" {
		return argValue(alt[0], name, path, depth+1)
	}
	lname := strings.ToLower(name)
	command := lname == "cmd" || lname == "command"
	switch n.typ() {
	case "object":
		obj := map[string]any{}
		for _, req := range n.Required {
			if p := n.Properties[req]; p != nil {
				obj[req] = argValue(p, req, path, depth+1)
			} else {
				obj[req] = "mock"
			}
		}
		return obj
	case "array":
		if command {
			return []string{"cat", path}
		}
		if n.MinItems > 0 && n.Items != nil {
			out := make([]any, n.MinItems)
			for i := range out {
				out[i] = argValue(n.Items, name, path, depth+1)
			}
			return out
		}
		return []any{}
	case "integer", "number":
		switch {
		case n.Minimum != nil:
			return *n.Minimum
		case n.ExclusiveMinimum != nil:
			return *n.ExclusiveMinimum + 1
		}
		return 1
	case "boolean":
		return false
	}
	switch {
	case command:
		return "cat " + path
	case strings.Contains(lname, "path") || strings.Contains(lname, "file"):
		return path
	case strings.Contains(lname, "url"):
		return "https://example.com/"
	}
	return "mock"
}
