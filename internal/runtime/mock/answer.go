package mock

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// wire is the API format of an endpoint.
type wire uint8

const (
	wireOpenAI      wire = iota // POST /v1/chat/completions
	wireAnthropic               // POST /v1/messages
	wireResponses               // POST /v1/responses
	wireCountTokens             // POST /v1/messages/count_tokens
	wireEmbeddings              // POST /v1/embeddings
	wireCompletions             // POST /v1/completions (legacy)
)

const (
	defaultChunks    = 4
	defaultModel     = "mock-model"
	defaultReasoning = "Let me think about this. The user wants their message echoed back, so I will repeat it."
	maxPooledBuf     = 64 << 10
	// maxHeaderBytes bounds Step.HeaderBytes.
	maxHeaderBytes = 1 << 20
	// fillerValueBytes is the value size of one X-Mock-Filler header.
	fillerValueBytes = 4000
)

// genRequest is the part of a generation request the mock reads.
type genRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Input json.RawMessage `json:"input"`
	// Prompt is a legacy completions prompt (a string or strings).
	Prompt json.RawMessage `json:"prompt"`
	// EncodingFormat and Dimensions are embeddings options.
	EncodingFormat string `json:"encoding_format"`
	Dimensions     int    `json:"dimensions"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// lastUserText returns the text of the last user message (Chat Completions
// and Messages: messages[]; Responses: input string or items).
func (r *genRequest) lastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return contentText(r.Messages[i].Content)
		}
	}
	if len(r.Input) == 0 {
		return ""
	}
	if r.Input[0] == '"' {
		return contentText(r.Input)
	}
	var items []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(r.Input, &items) != nil {
		return ""
	}
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Role == "user" {
			return contentText(items[i].Content)
		}
	}
	return ""
}

// contentText reads a message content that is a string or a list of parts,
// joining the text of text parts.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	case '[':
		var parts []contentPart
		if json.Unmarshal(raw, &parts) != nil {
			return ""
		}
		var sb strings.Builder
		for _, p := range parts {
			switch p.Type {
			case "text", "input_text", "output_text":
				sb.WriteString(p.Text)
			}
		}
		return sb.String()
	}
	return ""
}

// apiKey returns the caller's key from Authorization: Bearer or x-api-key.
func apiKey(r *http.Request) string {
	if v := r.Header["Authorization"]; len(v) > 0 {
		a := v[0]
		if len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
			if k := strings.TrimSpace(a[7:]); k != "" {
				return k
			}
		}
	}
	if v := r.Header["X-Api-Key"]; len(v) > 0 && v[0] != "" {
		return v[0]
	}
	return AnonymousKey
}

var errTooLarge = errors.New("request body too large")

// readAll reads r to EOF into b (reading to EOF lets net/http watch the
// connection and cancel the request context when the client goes away).
func readAll(r io.Reader, b []byte, limit int) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if len(b) > limit {
			return b, errTooLarge
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// generation serves one call to a generation endpoint.
func (s *Server) generation(w http.ResponseWriter, r *http.Request, wr wire) {
	if !allowMethod(w, r, http.MethodPost) {
		return
	}
	key := apiKey(r)
	bp := s.bufs.Get().(*[]byte)
	body, readErr := readAll(r.Body, (*bp)[:0], maxRequestBytes)
	var req genRequest
	var parseErr error
	if readErr == nil {
		parseErr = json.Unmarshal(body, &req)
	}

	c := &call{
		s:            s,
		w:            w,
		rc:           http.NewResponseController(w),
		ctx:          r.Context(),
		wire:         wr,
		key:          key,
		model:        req.Model,
		stream:       req.Stream,
		includeUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		promptTokens: max(estimateTokens(len(body)), 1),
		buf:          body[:0],
		first:        true,
	}
	if c.model == "" {
		c.model = defaultModel
	}
	b := s.stats.Load()
	kb := b.begin(key, req.Model)
	defer func() {
		b.end(kb, c.gone)
		if cap(c.buf) <= maxPooledBuf {
			*bp = c.buf[:0]
			s.bufs.Put(bp)
		}
	}()

	switch {
	case errors.Is(readErr, errTooLarge):
		c.writeError(http.StatusRequestEntityTooLarge, "Request body exceeds 32 MiB.")
		return
	case readErr != nil:
		c.gone = true
		return
	case parseErr != nil:
		c.writeError(http.StatusBadRequest, "The request body is not valid JSON.")
		return
	}

	prog := s.prog.Load()
	c.step = prog.pick(key, req.Model, r.URL.Path, r.Header, false)
	if s.logger.IsDebug() {
		s.logger.Debug("call", "path", r.URL.Path, "model", req.Model, "stream", req.Stream,
			"status", c.step.status(), "scripted", c.step != defaultStep)
	}
	switch wr {
	case wireCompletions:
		c.text = "echo: " + contentText(req.Prompt)
		if len(req.Prompt) > 0 && req.Prompt[0] == '[' {
			if p := embeddingInputs(req.Prompt); len(p) > 0 {
				c.text = "echo: " + p[len(p)-1]
			}
		}
	case wireEmbeddings:
		c.inputs, c.dims, c.base64 = embeddingInputs(req.Input), req.Dimensions, req.EncodingFormat == "base64"
		c.stream = false
	case wireCountTokens:
		c.stream = false
	default:
		c.text = "echo: " + req.lastUserText()
	}
	if c.step.Text != nil {
		c.text = *c.step.Text
	}
	if prog.script.AnswerTools && c.step.Text == nil {
		c.answerTools(body)
	}
	if c.step.ReasoningChunks > 0 && (wr == wireOpenAI || wr == wireAnthropic) && c.tool == nil {
		c.reasoning = c.step.ReasoningText
		if c.reasoning == "" {
			c.reasoning = defaultReasoning
		}
	}
	c.run()
}

// call is the state of one answer. It is used by one goroutine.
type call struct {
	s    *Server
	w    http.ResponseWriter
	rc   *http.ResponseController
	ctx  context.Context
	wire wire
	step *Step
	key  string       // the caller's API key
	gz   *gzip.Writer // the body's compressor (Step.Gzip), once headers are sent

	model        string
	stream       bool
	includeUsage bool
	promptTokens int
	text         string
	reasoning    string

	tool        *toolCall // the tool call this answer makes, if any
	inputs      []string  // embeddings: the texts to embed
	dims        int       // embeddings: requested dimensions
	base64      bool      // embeddings: encoding_format base64
	id, itemID  string
	created     int64
	buf         []byte
	sent        int  // content frames sent
	seq         int  // Responses sequence_number
	first       bool // OpenAI: role not yet sent
	pinged      bool // Anthropic: ping after the first block start sent
	headersSent bool
	stalled     bool
	gone        bool // client went away (or the server is closing)
}

func (c *call) run() {
	st := c.step
	if d := st.latency(); d > 0 && !c.pause(d) {
		return
	}
	if st.Reset {
		c.resetConn()
		return
	}
	defer c.endGzip()
	switch {
	case st.Redirect != "":
		c.redirect()
		return
	case st.KeepaliveOnly:
		c.keepaliveOnly()
		return
	}
	status := st.status()
	if st.Body != "" {
		c.buf = append(c.buf[:0], st.Body...)
		c.writeBody(status, sniffContentType(st.Body), c.buf)
		return
	}
	if st.EchoKey {
		if st.Status == 0 {
			status = http.StatusUnauthorized
		}
		c.buf = appendErrorBody(c.buf[:0], c.wire, status, c.model, echoKeyMessage(c.wire, c.key))
		c.writeBody(status, "application/json", c.buf)
		return
	}
	if status >= 400 {
		c.buf = appendErrorBody(c.buf[:0], c.wire, status, c.model, "")
		c.writeBody(status, "application/json", c.buf)
		return
	}
	switch c.wire {
	case wireAnthropic:
		c.id = c.s.newID("msg_01")
	case wireResponses:
		c.id = c.s.newID("resp_")
		c.itemID = c.s.newID("msg_")
	case wireCompletions:
		c.id = c.s.newID("cmpl-")
	default:
		c.id = c.s.newID("chatcmpl-")
	}
	c.created = time.Now().Unix()
	if c.stream {
		c.streamAnswer(status)
	} else {
		c.wholeAnswer(status)
	}
}

func (c *call) writeError(status int, msg string) {
	c.buf = appendErrorBody(c.buf[:0], c.wire, status, c.model, msg)
	c.writeBody(status, "application/json", c.buf)
}

// echoKeyMessage is an authentication error message that quotes the
// caller's key (Step.EchoKey).
func echoKeyMessage(wr wire, key string) string {
	if wr == wireAnthropic {
		return "invalid x-api-key: " + key
	}
	return "Incorrect API key provided: " + key + ". You can find your API key at https://platform.openai.com/account/api-keys."
}

// redirect answers Step.Redirect: a 3xx (302 by default) with Location.
func (c *call) redirect() {
	status := c.step.Status
	if status == 0 {
		status = http.StatusFound
	}
	c.w.Header().Set("Location", c.step.Redirect)
	u := html.EscapeString(c.step.Redirect)
	c.buf = append(c.buf[:0], `<html><head><title>Moved</title></head><body>Moved to <a href="`+u+`">`+u+`</a>.</body></html>`...)
	c.writeBody(status, "text/html; charset=utf-8", c.buf)
}

// keepaliveOnly answers Step.KeepaliveOnly: an event stream of nothing but
// ": keepalive" comments until StallMS passes or the client leaves.
func (c *call) keepaliveOnly() {
	st := c.step
	c.writeHeader(http.StatusOK, "text/event-stream; charset=utf-8", -1)
	every := time.Second
	if st.PingEveryMS > 0 {
		every = time.Duration(st.PingEveryMS) * time.Millisecond
	}
	var end <-chan time.Time
	if st.StallMS > 0 {
		t := time.NewTimer(time.Duration(st.StallMS) * time.Millisecond)
		defer t.Stop()
		end = t.C
	}
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		c.buf = append(c.buf[:0], ": keepalive\n\n"...)
		c.write(c.buf)
		if !c.flush() {
			return
		}
		select {
		case <-tk.C:
		case <-end:
			return
		case <-c.ctx.Done():
			c.gone = true
			return
		case <-c.s.quit:
			c.gone = true
			return
		}
	}
}

// writeHeader sends the status line and headers: defaults first, then the
// step's headers (which may override them), the filler headers of
// Step.HeaderBytes, and for Step.Gzip Content-Encoding (no length; the
// body goes through c.gz from then on). length < 0 means unknown.
func (c *call) writeHeader(status int, contentType string, length int) {
	h := c.w.Header()
	h.Set("Content-Type", contentType)
	zip := c.step != nil && c.step.Gzip
	if length >= 0 && !zip {
		h.Set("Content-Length", strconv.Itoa(length))
	} else if strings.HasPrefix(contentType, "text/event-stream") {
		h.Set("Cache-Control", "no-cache")
	}
	if c.step != nil {
		for k, v := range c.step.Headers {
			h.Set(k, v)
		}
		for i, left := 0, c.step.HeaderBytes; left > 0; i++ {
			name := "X-Mock-Filler-" + strconv.Itoa(i)
			n := max(min(left-len(name)-4, fillerValueBytes), 1)
			h.Set(name, strings.Repeat("f", n))
			left -= len(name) + 4 + n
		}
	}
	if zip {
		h.Set("Content-Encoding", "gzip")
	}
	c.w.WriteHeader(status)
	c.headersSent = true
	if zip {
		c.gz = gzip.NewWriter(c.w)
	}
}

// endGzip writes the gzip trailer of a compressed answer that ended
// normally.
func (c *call) endGzip() {
	if c.gz != nil && !c.gone {
		if err := c.gz.Close(); err != nil {
			c.gone = true
		}
	}
	c.gz = nil
}

// writeBody sends a whole body, trickled when the step asks for it.
func (c *call) writeBody(status int, contentType string, body []byte) {
	c.writeHeader(status, contentType, len(body))
	bps := 0
	if c.step != nil {
		bps = c.step.TrickleBytesPerSec
	}
	if bps <= 0 {
		c.write(body)
		return
	}
	size, interval := trickle(bps)
	for pos := 0; pos < len(body); pos += size {
		if pos > 0 {
			if !c.flush() || !c.pause(interval) {
				return
			}
		}
		c.write(body[pos:min(pos+size, len(body))])
		if c.gone {
			return
		}
	}
}

// trickle returns the piece size and interval for a rate: pieces of about
// a tenth of a second's worth of bytes.
func trickle(bps int) (int, time.Duration) {
	size := max(bps/10, 1)
	return size, time.Duration(size) * time.Second / time.Duration(bps)
}

func sniffContentType(body string) string {
	t := strings.TrimLeft(body, " \t\r\n")
	switch {
	case strings.HasPrefix(t, "{"), strings.HasPrefix(t, "["):
		return "application/json"
	case strings.HasPrefix(t, "data:"), strings.HasPrefix(t, "event:"), strings.HasPrefix(t, ":"):
		return "text/event-stream"
	default:
		return "text/plain; charset=utf-8"
	}
}

func (c *call) wholeAnswer(status int) {
	st := c.step
	switch {
	case c.wire == wireAnthropic && c.tool != nil:
		c.buf = c.anToolWhole(c.buf[:0])
	case c.wire == wireAnthropic:
		c.buf = c.anWhole(c.buf[:0])
	case c.wire == wireResponses:
		c.buf = c.rsWhole(c.buf[:0])
	case c.wire == wireCountTokens:
		c.buf = c.countTokensWhole(c.buf[:0])
	case c.wire == wireEmbeddings:
		c.buf = c.embeddingsWhole(c.buf[:0])
	case c.wire == wireCompletions:
		c.buf = c.cmWhole(c.buf[:0])
	case c.tool != nil:
		c.buf = c.oaToolWhole(c.buf[:0])
	default:
		c.buf = c.oaWhole(c.buf[:0])
	}
	switch {
	case st.StallAfterChunks != nil:
		c.writeHeader(status, "application/json", -1)
		if c.flush() && c.stall() && st.ResetAfterChunks != nil {
			c.abort()
		}
	case st.ResetAfterChunks != nil:
		c.writeHeader(status, "application/json", len(c.buf))
		c.write(c.buf[:len(c.buf)/2])
		c.abort()
	default:
		c.writeBody(status, "application/json", c.buf)
	}
}

func (c *call) streamAnswer(status int) {
	st := c.step
	c.writeHeader(status, "text/event-stream; charset=utf-8", -1)
	if st.ErrorEvent != nil {
		c.buf = c.appendErrorEvent(c.buf[:0], st.ErrorEvent)
		c.write(c.buf)
		if !st.ContinueAfterError {
			c.flush()
			return
		}
	}
	if c.tool != nil {
		c.emit(c.appendToolStream)
		return
	}
	c.emit(c.appendStart)

	interval := time.Duration(st.ChunkIntervalMS) * time.Millisecond
	if c.reasoning != "" {
		c.emit(c.appendReasoningStart)
		for _, piece := range splitRunes(c.reasoning, st.ReasoningChunks) {
			if !c.beforeFrame(interval) {
				return
			}
			c.buf = c.appendReasoningFrame(c.buf[:0], piece)
			c.write(c.buf)
			c.sent++
		}
		c.emit(c.appendReasoningEnd)
	}

	var pieces []string
	textInterval := interval
	if st.TrickleBytesPerSec > 0 {
		var size int
		size, textInterval = trickle(st.TrickleBytesPerSec)
		pieces = splitBytes(c.text, size)
	} else {
		n := st.Chunks
		if n == 0 {
			n = defaultChunks
		}
		pieces = splitRunes(c.text, n)
	}
	c.emit(c.appendTextStart)
	for _, piece := range pieces {
		if !c.beforeFrame(textInterval) {
			return
		}
		c.buf = c.appendTextFrame(c.buf[:0], piece)
		c.write(c.buf)
		c.sent++
	}
	if c.gone || c.gate() {
		return
	}
	c.emit(c.appendFinish)
	// No flush: net/http sends the rest with the chunked terminator in one write.
}

// emit writes the frames an appender produces.
func (c *call) emit(appendFn func([]byte) []byte) {
	c.buf = appendFn(c.buf[:0])
	if len(c.buf) > 0 {
		c.write(c.buf)
	}
}

// beforeFrame runs the fault gates and the inter-frame pause before a
// content frame; false means the answer is over.
func (c *call) beforeFrame(interval time.Duration) bool {
	if c.gone || c.gate() {
		return false
	}
	if c.sent > 0 && interval > 0 {
		if !c.flush() || !c.pause(interval) {
			return false
		}
	}
	return !c.gone
}

// gate applies stall_after_chunks and reset_after_chunks once c.sent has
// reached them; true means the answer is over. A stall that runs out and a
// reset count already reached end in the reset.
func (c *call) gate() bool {
	st := c.step
	if st.StallAfterChunks != nil && c.sent >= *st.StallAfterChunks && !c.stalled {
		c.stalled = true
		if !c.flush() || !c.stall() {
			return true
		}
		if st.ResetAfterChunks == nil || c.sent < *st.ResetAfterChunks {
			return true
		}
	}
	if st.ResetAfterChunks != nil && c.sent >= *st.ResetAfterChunks {
		c.abort()
	}
	return c.stalled
}

// stall sends nothing (but pings) until the client leaves, the server closes
// or stall_ms passes; true means stall_ms passed.
func (c *call) stall() bool {
	d := time.Duration(-1)
	if c.step.StallMS > 0 {
		d = time.Duration(c.step.StallMS) * time.Millisecond
	}
	return c.pause(d)
}

// pause waits d (forever when d < 0), sending keep-alives on a stream when
// the step asks for them; false means the client went away or the server
// is closing.
func (c *call) pause(d time.Duration) bool {
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	var tick <-chan time.Time
	if c.stream && c.headersSent && c.step.PingEveryMS > 0 {
		tk := time.NewTicker(time.Duration(c.step.PingEveryMS) * time.Millisecond)
		defer tk.Stop()
		tick = tk.C
	}
	for {
		select {
		case <-timeout:
			return true
		case <-tick:
			c.buf = c.appendPing(c.buf[:0])
			c.write(c.buf)
			if !c.flush() {
				return false
			}
		case <-c.ctx.Done():
			c.gone = true
			return false
		case <-c.s.quit:
			c.gone = true
			return false
		}
	}
}

func (c *call) write(b []byte) {
	if c.gone {
		return
	}
	var w io.Writer = c.w
	if c.gz != nil {
		w = c.gz
	}
	if _, err := w.Write(b); err != nil {
		c.gone = true
	}
}

// flush pushes buffered bytes (and compressed ones) to the client; false
// means it is gone.
func (c *call) flush() bool {
	if c.gone {
		return false
	}
	if c.gz != nil && c.gz.Flush() != nil {
		c.gone = true
		return false
	}
	if err := c.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		c.gone = true
	}
	return !c.gone
}

// abort drops the connection mid-body: the client sees an unexpected EOF,
// never a clean end of the response (nor a gzip trailer).
func (c *call) abort() {
	c.flush()
	c.gz = nil
	panic(http.ErrAbortHandler)
}

// resetConn closes the connection with a TCP RST before any byte is sent.
func (c *call) resetConn() {
	conn, _, err := c.rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

func (c *call) completionTokens() int { return max(estimateTokens(len(c.text)), 1) }

// cachedTokens is the part of the prompt reported as read from the cache.
func (c *call) cachedTokens() int { return min(max(c.step.CachedTokens, 0), c.promptTokens) }

// finishReason is the OpenAI finish_reason of a text answer.
func (c *call) finishReason() string {
	if c.step.Truncated {
		return "length"
	}
	return "stop"
}

// stopReason is the Anthropic stop_reason of a text answer.
func (c *call) stopReason() string {
	if c.step.Truncated {
		return "max_tokens"
	}
	return "end_turn"
}

func (c *call) reasoningTokens() int { return estimateTokens(len(c.reasoning)) }

// The appenders below dispatch on the wire format.

func (c *call) appendStart(b []byte) []byte {
	switch c.wire {
	case wireAnthropic:
		return c.anStart(b)
	case wireResponses:
		return c.rsStart(b)
	}
	return b
}

func (c *call) appendReasoningStart(b []byte) []byte {
	if c.wire == wireAnthropic {
		return c.anReasoningStart(b)
	}
	return b
}

func (c *call) appendReasoningFrame(b []byte, piece string) []byte {
	if c.wire == wireAnthropic {
		return c.anDelta(b, 0, "thinking_delta", "thinking", piece)
	}
	return c.oaDelta(b, "reasoning_content", piece)
}

func (c *call) appendReasoningEnd(b []byte) []byte {
	if c.wire == wireAnthropic {
		return c.anReasoningEnd(b)
	}
	return b
}

func (c *call) appendTextStart(b []byte) []byte {
	if c.wire == wireAnthropic {
		return c.anTextStart(b)
	}
	return b
}

func (c *call) appendTextFrame(b []byte, piece string) []byte {
	switch c.wire {
	case wireAnthropic:
		return c.anDelta(b, c.textIndex(), "text_delta", "text", piece)
	case wireResponses:
		return c.rsDelta(b, piece)
	case wireCompletions:
		return c.cmDelta(b, piece)
	}
	return c.oaDelta(b, "content", piece)
}

func (c *call) appendFinish(b []byte) []byte {
	switch c.wire {
	case wireAnthropic:
		return c.anFinish(b)
	case wireResponses:
		return c.rsFinish(b)
	case wireCompletions:
		return c.cmFinish(b)
	}
	return c.oaFinish(b)
}

// answerTools plans a tool-call answer (script answer_tools).
func (c *call) answerTools(body []byte) {
	p, ok := planTools(c.wire, body)
	if !ok {
		return
	}
	if p.found {
		c.text = finalText(p.quote)
		return
	}
	c.tool = &toolCall{name: p.call.name, namespace: p.call.namespace, args: toolArgs(p.call.schema, p.user)}
	c.toolIDs()
	c.text = c.tool.args // the completion the usage counts
}

func (c *call) appendToolStream(b []byte) []byte {
	switch c.wire {
	case wireAnthropic:
		return c.anToolStream(b)
	case wireResponses:
		return c.rsToolStream(b)
	}
	return c.oaToolStream(b)
}

func (c *call) appendPing(b []byte) []byte {
	if c.wire == wireAnthropic {
		return append(b, "event: ping\ndata: {\"type\": \"ping\"}\n\n"...)
	}
	return append(b, ": ping\n\n"...)
}

func (c *call) appendErrorEvent(b []byte, ee *ErrorEvent) []byte {
	switch c.wire {
	case wireAnthropic:
		return anErrorEvent(b, ee)
	case wireResponses:
		return c.rsErrorEvent(b, ee)
	}
	return oaErrorEvent(b, ee)
}
