package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
)

// Kinds of the open Responses output item.
const (
	itemNone = iota
	itemReasoning
	itemMessage
)

// rsToolState is one streamed function call item.
type rsToolState struct {
	outputIndex int
	itemID      string
	callID      string
	name        string
	args        strings.Builder
	done        bool
}

// chatToResponses is the Translator from Chat Completions chunks to
// Responses API events.
type chatToResponses struct {
	call  *ResponsesCall
	model string
	now   func() time.Time

	id      string
	created int64
	started bool
	done    bool
	seq     int

	output []json.RawMessage // finished items, by output index

	open      int // kind of the open reasoning or message item
	openIndex int
	openID    string
	text      strings.Builder // the open part's text
	part      string          // "output_text" or "refusal": the open part
	partIndex int
	parts     []rsOutPart // finished parts of the open message

	tools    map[int]*rsToolState
	toolList []*rsToolState
	lastTool int

	finish    string
	finishSet bool
	usage     *oaUsage
}

// NewChatStream returns a Translator from a Chat Completions chunk stream
// to the Responses API event stream answering the call: response.created
// and response.in_progress first; then per output item
// response.output_item.added, its content events and
// response.output_item.done — a reasoning item (reasoning_content as
// response.reasoning_summary_part.added / reasoning_summary_text.delta /
// .done / reasoning_summary_part.done), a message item
// (response.content_part.added, response.output_text.delta (or
// response.refusal.delta), .done, response.content_part.done) and one
// function_call item per tool call (response.function_call_arguments.delta
// / .done); finally response.completed, or response.incomplete for a
// length or content_filter finish, with the whole Response and its usage
// once [DONE] arrives. Every event has a sequence_number from 0. An
// in-stream error becomes response.failed. model, when not empty, is
// reported instead of the upstream's. Not safe for concurrent use.
func (c *ResponsesCall) NewChatStream(model string) Translator {
	return &chatToResponses{call: c, model: model, now: time.Now}
}

// NewAnthropicStream returns a Translator from an Anthropic Messages
// stream to the Responses API event stream answering the call: the chain
// of NewAnthropicToOpenAIStream and NewChatStream.
func (c *ResponsesCall) NewAnthropicStream(model string) Translator {
	return Chain(NewAnthropicToOpenAIStream(model), c.NewChatStream(model))
}

// Event implements Translator.
func (t *chatToResponses) Event(ev sse.Event) ([]sse.Event, error) {
	data := bytes.TrimSpace(ev.Data)
	if t.done || ev.Comment || len(data) == 0 {
		return nil, nil
	}
	if bytes.Equal(data, []byte("[DONE]")) {
		return t.end(nil), nil
	}
	var c oaChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("decode openai chunk: %w", err)
	}
	var out []sse.Event
	if rawKind(c.Error) != 'n' {
		return t.fail(data), nil
	}
	if len(c.Choices) == 0 && c.Usage == nil {
		return nil, nil
	}
	if !t.started {
		var head struct {
			Created int64 `json:"created"`
		}
		_ = json.Unmarshal(data, &head)
		out = t.start(c.ID, c.Model, head.Created, out)
	}
	if c.Usage != nil {
		u := *c.Usage
		t.usage = &u
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue
		}
		d := &ch.Delta
		if reasoning := d.reasoning(); reasoning != nil && *reasoning != "" {
			out = t.ensure(itemReasoning, "", out)
			t.text.WriteString(*reasoning)
			out = t.delta("response.reasoning_summary_text.delta", `,"summary_index":0`, *reasoning, out)
		}
		if d.Content != nil && *d.Content != "" {
			out = t.ensure(itemMessage, "output_text", out)
			t.text.WriteString(*d.Content)
			out = t.delta("response.output_text.delta", `,"content_index":`+strconv.Itoa(t.partIndex), *d.Content, out)
		}
		if d.Refusal != nil && *d.Refusal != "" {
			out = t.ensure(itemMessage, "refusal", out)
			t.text.WriteString(*d.Refusal)
			out = t.delta("response.refusal.delta", `,"content_index":`+strconv.Itoa(t.partIndex), *d.Refusal, out)
		}
		for j := range d.ToolCalls {
			tc := &d.ToolCalls[j]
			out = t.toolDelta(toolKey(tc, t.lastTool, len(t.toolList)), tc.ID, tc.Function.Name, tc.Function.Arguments, out)
		}
		if fc := d.FunctionCall; fc != nil {
			out = t.toolDelta(functionCallKey, "", fc.Name, fc.Arguments, out)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			t.finish, t.finishSet = *ch.FinishReason, true
		}
	}
	return out, nil
}

// Finish implements Translator: when the upstream sent a finish_reason but
// no [DONE], the items' ends and the final event are still owed.
func (t *chatToResponses) Finish() []sse.Event {
	if t.done || !t.finishSet {
		return nil
	}
	return t.end(nil)
}

// event starts an event's data: {"type":…,"sequence_number":N.
func (t *chatToResponses) event(typ string, extra int) []byte {
	b := make([]byte, 0, 64+len(typ)+extra)
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","sequence_number":`...)
	b = appendInt(b, t.seq)
	t.seq++
	return b
}

func (t *chatToResponses) emit(out []sse.Event, typ string, b []byte) []sse.Event {
	return append(out, sse.Event{Event: typ, Data: append(b, '}')})
}

// emitValue sends an event whose remaining member is key: v.
func (t *chatToResponses) emitValue(out []sse.Event, typ, members, key string, v any) []sse.Event {
	raw, err := marshal(v)
	if err != nil {
		raw = []byte("null")
	}
	b := t.event(typ, len(members)+len(key)+len(raw))
	b = append(b, members...)
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	b = append(b, raw...)
	return t.emit(out, typ, b)
}

func (t *chatToResponses) start(id, model string, created int64, out []sse.Event) []sse.Event {
	t.started = true
	t.id = id
	if t.model != "" {
		model = t.model
	}
	t.model = model
	if created <= 0 {
		created = t.now().Unix()
	}
	t.created = created
	r := t.call.response(id, model, created, "in_progress", nil)
	out = t.emitValue(out, "response.created", "", "response", r)
	return t.emitValue(out, "response.in_progress", "", "response", r)
}

// itemRef is the item_id/output_index members of the open item.
func (t *chatToResponses) itemRef() string {
	return `,"item_id":` + string(appendString(nil, t.openID)) + `,"output_index":` + strconv.Itoa(t.openIndex)
}

func (t *chatToResponses) base() string { return strings.TrimPrefix(responseID(t.id), "resp_") }

// ensure makes an item of kind (and, for a message, a part of kind part)
// the open one, closing what is open.
func (t *chatToResponses) ensure(kind int, part string, out []sse.Event) []sse.Event {
	if t.open == kind && (kind != itemMessage || t.part == part) {
		return out
	}
	if t.open != kind {
		out = t.closeItem(out)
		t.open, t.openIndex = kind, len(t.output)
		t.output = append(t.output, nil)
		if kind == itemReasoning {
			t.openID = "rs_" + t.base() + "_" + strconv.Itoa(t.openIndex)
			out = t.emitValue(out, "response.output_item.added", `,"output_index":`+strconv.Itoa(t.openIndex), "item",
				rsReasoningItem{ID: t.openID, Type: "reasoning", Summary: []rsSummary{}})
			return t.emitValue(out, "response.reasoning_summary_part.added", t.itemRef()+`,"summary_index":0`, "part", rsSummary{Type: "summary_text"})
		}
		t.openID = "msg_" + t.base() + "_" + strconv.Itoa(t.openIndex)
		t.parts, t.partIndex, t.part = nil, -1, ""
		out = t.emitValue(out, "response.output_item.added", `,"output_index":`+strconv.Itoa(t.openIndex), "item",
			rsMessageItem{ID: t.openID, Type: "message", Status: "in_progress", Role: "assistant", Content: []rsOutPart{}})
	} else {
		out = t.closePart(out)
	}
	t.part = part
	t.partIndex++
	p := outputText("")
	if part == "refusal" {
		p = refusalPart("")
	}
	return t.emitValue(out, "response.content_part.added", t.itemRef()+`,"content_index":`+strconv.Itoa(t.partIndex), "part", p)
}

// delta sends a text delta of the open item.
func (t *chatToResponses) delta(typ, members, text string, out []sse.Event) []sse.Event {
	ref := t.itemRef()
	b := t.event(typ, len(ref)+len(members)+len(text)+32)
	b = append(b, ref...)
	b = append(b, members...)
	b = append(b, `,"delta":`...)
	b = appendString(b, text)
	if typ == "response.output_text.delta" {
		b = append(b, `,"logprobs":[]`...)
	}
	return t.emit(out, typ, b)
}

// closePart ends the open message part.
func (t *chatToResponses) closePart(out []sse.Event) []sse.Event {
	if t.part == "" {
		return out
	}
	text := t.text.String()
	t.text.Reset()
	ref := t.itemRef() + `,"content_index":` + strconv.Itoa(t.partIndex)
	p := outputText(text)
	if t.part == "refusal" {
		p = refusalPart(text)
		out = t.emitValue(out, "response.refusal.done", ref, "refusal", text)
	} else {
		out = t.emitValue(out, "response.output_text.done", ref+`,"logprobs":[]`, "text", text)
	}
	t.parts = append(t.parts, p)
	t.part = ""
	return t.emitValue(out, "response.content_part.done", ref, "part", p)
}

// closeItem ends the open reasoning or message item.
func (t *chatToResponses) closeItem(out []sse.Event) []sse.Event {
	var item any
	switch t.open {
	case itemNone:
		return out
	case itemReasoning:
		text := t.text.String()
		t.text.Reset()
		ref := t.itemRef() + `,"summary_index":0`
		out = t.emitValue(out, "response.reasoning_summary_text.done", ref, "text", text)
		out = t.emitValue(out, "response.reasoning_summary_part.done", ref, "part", rsSummary{Type: "summary_text", Text: text})
		item = rsReasoningItem{ID: t.openID, Type: "reasoning", Summary: []rsSummary{{Type: "summary_text", Text: text}}}
	case itemMessage:
		out = t.closePart(out)
		item = rsMessageItem{ID: t.openID, Type: "message", Status: "completed", Role: "assistant", Content: t.parts}
	}
	t.open = itemNone
	return t.doneItem(t.openIndex, item, out)
}

func (t *chatToResponses) doneItem(index int, item any, out []sse.Event) []sse.Event {
	raw, err := marshal(item)
	if err != nil {
		raw = []byte("null")
	}
	t.output[index] = raw
	b := t.event("response.output_item.done", len(raw)+32)
	b = append(b, `,"output_index":`...)
	b = appendInt(b, index)
	b = append(b, `,"item":`...)
	b = append(b, raw...)
	return t.emit(out, "response.output_item.done", b)
}

// toolDelta handles one tool call fragment: the first for a key adds a
// function_call item, argument fragments become
// response.function_call_arguments.delta.
func (t *chatToResponses) toolDelta(key int, id, name, args string, out []sse.Event) []sse.Event {
	if t.tools == nil {
		t.tools = make(map[int]*rsToolState, 2)
	}
	st, seen := t.tools[key]
	if !seen {
		out = t.closeItem(out)
		if id == "" {
			id = "call_" + t.base() + "_" + strconv.Itoa(len(t.toolList))
		}
		st = &rsToolState{outputIndex: len(t.output), itemID: "fc_" + id, callID: id, name: name}
		t.output = append(t.output, nil)
		t.tools[key] = st
		t.toolList = append(t.toolList, st)
		ns, fn := t.call.splitName(name)
		out = t.emitValue(out, "response.output_item.added", `,"output_index":`+strconv.Itoa(st.outputIndex), "item",
			rsCallItem{ID: st.itemID, Type: "function_call", Status: "in_progress", CallID: id, Name: fn, Namespace: ns})
	}
	t.lastTool = key
	if args == "" {
		return out
	}
	st.args.WriteString(args)
	b := t.event("response.function_call_arguments.delta", len(st.itemID)+len(args)+48)
	b = append(b, `,"item_id":`...)
	b = appendString(b, st.itemID)
	b = append(b, `,"output_index":`...)
	b = appendInt(b, st.outputIndex)
	b = append(b, `,"delta":`...)
	b = appendString(b, args)
	return t.emit(out, "response.function_call_arguments.delta", b)
}

// closeTools ends every function_call item.
func (t *chatToResponses) closeTools(out []sse.Event) []sse.Event {
	for _, st := range t.toolList {
		if st.done {
			continue
		}
		st.done = true
		ns, fn := t.call.splitName(st.name)
		args := st.args.String()
		ref := `,"item_id":` + string(appendString(nil, st.itemID)) + `,"output_index":` + strconv.Itoa(st.outputIndex) + `,"name":` + string(appendString(nil, fn))
		out = t.emitValue(out, "response.function_call_arguments.done", ref, "arguments", args)
		out = t.doneItem(st.outputIndex, rsCallItem{ID: st.itemID, Type: "function_call", Status: "completed", Arguments: args, CallID: st.callID, Name: fn, Namespace: ns}, out)
	}
	return out
}

// end closes every item and sends response.completed or
// response.incomplete.
func (t *chatToResponses) end(out []sse.Event) []sse.Event {
	if t.done {
		return out
	}
	if !t.started {
		out = t.start("", "", 0, out)
	}
	t.done = true
	out = t.closeItem(out)
	out = t.closeTools(out)
	status, inc := responseStatus(t.finish)
	r := t.call.response(t.id, t.model, t.created, status, t.output)
	r.IncompleteDetails = inc
	r.Usage = responsesUsage(t.usage)
	if r.Usage == nil {
		r.Usage = &rsUsage{}
	}
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	return t.emitValue(out, typ, "", "response", r)
}

// fail ends the stream with response.failed carrying the upstream error.
func (t *chatToResponses) fail(data []byte) []sse.Event {
	var out []sse.Event
	if !t.started {
		out = t.start("", "", 0, out)
	}
	t.done = true
	obj, _, text := parseError(data)
	e := &rsError{Code: "server_error", Message: text}
	if obj != nil {
		if m := obj.str("message"); m != "" {
			e.Message = m
		}
		if code := obj.str("code"); code != "" {
			e.Code = code
		} else if typ := obj.str("type"); typ != "" {
			e.Code = typ
		}
	}
	if e.Message == "" {
		e.Message = "upstream error"
	}
	r := t.call.response(t.id, t.model, t.created, "failed", t.output)
	for i, o := range r.Output {
		if o == nil {
			r.Output[i] = json.RawMessage("null")
		}
	}
	r.Error = e
	return t.emitValue(out, "response.failed", "", "response", r)
}

// chain is a Translator feeding a's events into b.
type chain struct{ a, b Translator }

// Chain returns the Translator that pivots through a middle format: every
// event a emits is fed to b (e.g. Anthropic → Chat Completions → Responses).
// Not safe for concurrent use.
func Chain(a, b Translator) Translator { return &chain{a: a, b: b} }

// Event implements Translator.
func (c *chain) Event(ev sse.Event) ([]sse.Event, error) {
	mid, err := c.a.Event(ev)
	if err != nil {
		return nil, err
	}
	return c.feed(mid)
}

func (c *chain) feed(mid []sse.Event) ([]sse.Event, error) {
	var out []sse.Event
	for _, m := range mid {
		o, err := c.b.Event(m)
		if err != nil {
			return nil, err
		}
		out = append(out, o...)
	}
	return out, nil
}

// Finish implements Translator.
func (c *chain) Finish() []sse.Event {
	out, _ := c.feed(c.a.Finish()) // a's own events; b reports nothing it cannot read
	return append(out, c.b.Finish()...)
}
