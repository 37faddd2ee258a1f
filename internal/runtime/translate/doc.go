// Package translate converts between the OpenAI Chat Completions, the
// Anthropic Messages and the OpenAI Responses wire formats, so every client
// format reaches every provider kind. It covers request bodies, non-stream
// response bodies, streamed events (one stateful Translator per stream),
// error bodies, and a token estimate for count_tokens. In the older names
// "OpenAI" means Chat Completions (OpenAIToAnthropicRequest); the Responses
// API goes through a ResponsesCall. docs/compatibility.md lists every field
// per client format and provider kind.
//
// All functions are pure and safe for concurrent use; a Translator is
// stateful and owned by one stream (not goroutine-safe).
//
// # Requests, OpenAI → Anthropic
//
//   - system and developer messages, wherever they appear, are hoisted into
//     the top-level system (one text → a string, several → text blocks).
//   - user/assistant content becomes content blocks: text parts → text
//     (cache_control on a part is kept), image_url data: URLs → image with a
//     base64 source, http(s) URLs → image with a url source, file parts with a
//     data:application/pdf URL → document; tool_calls → tool_use (arguments
//     parsed to an object), tool messages → tool_result blocks of a user
//     message; consecutive same-role messages are merged (Anthropic wants all
//     tool results of a turn in one user message). Empty text is dropped.
//     assistant reasoning_content is dropped (Anthropic needs a signature to
//     accept a thinking block back), and so are message name fields. Legacy
//     function_call/function messages are paired with synthetic tool ids.
//   - tools/functions → tools with input_schema (an empty object schema when
//     parameters is absent); tool_choice auto/none/required/{function} →
//     auto/none/any/{type:tool}; parallel_tool_calls:false →
//     disable_parallel_tool_use. tool_choice is dropped when there are no tools.
//   - max_completion_tokens (else max_tokens) → max_tokens, DefaultMaxTokens
//     when absent (Anthropic requires it). temperature is clamped to
//     Anthropic's 0..1 range; top_p kept; stop (string or array) →
//     stop_sequences; stream kept (Anthropic always reports usage, so
//     stream_options is dropped); user (or safety_identifier) →
//     metadata.user_id.
//   - reasoning_effort → thinking {type:enabled, budget_tokens}: minimal 1024,
//     low 2048, medium 8192, high 16384, none/absent → no thinking. The budget
//     is capped at max_tokens-1 (Anthropic's rule; with no max tokens given,
//     max_tokens becomes budget + DefaultMaxTokens); when it is below 1024
//     thinking stays off. With thinking on, temperature and top_p are dropped
//     (Anthropic rejects them) and a forced tool_choice is a FieldError.
//   - response_format json_schema → output_config.format (structured
//     output); reasoning_effort xhigh and max → budgets 32768 and 65536.
//   - FieldError (400) for what has no Anthropic equivalent: n > 1,
//     logprobs, response_format json_object, audio output,
//     input_audio parts, non-function tools, unsupported image types,
//     unparseable tool arguments. frequency/presence penalties, seed,
//     logit_bias, service_tier, store, prediction and other unknown fields
//     are dropped.
//
// # Requests, Anthropic → OpenAI
//
//   - system (string or text blocks, joined with a blank line) → a leading
//     system message; a system-role message inside messages → a system
//     message in place. cache_control is dropped everywhere (OpenAI caches
//     by itself).
//   - user blocks: text → text parts (a lone text → a string), image base64 →
//     a data: URL, image url → the URL, document base64 → a file part,
//     document text → text; tool_result blocks → tool messages placed before
//     the rest of that user turn (tool_result images move into that user
//     message; is_error is dropped). assistant blocks: text joined into
//     content, tool_use → tool_calls (input as a JSON string), thinking and
//     redacted_thinking dropped.
//   - tools → function tools (server tools such as web_search are a
//     FieldError); tool_choice auto/any/tool/none → auto/required/{function}/
//     none; disable_parallel_tool_use → parallel_tool_calls:false.
//   - max_tokens → max_tokens (the field every OpenAI-compatible server
//     knows); stop_sequences → stop; temperature, top_p kept; top_k dropped
//     (OpenAI has none); stream → stream + stream_options.include_usage;
//     metadata.user_id → user (its SHA-256 in hex when longer than 64
//     characters); thinking enabled → reasoning_effort by budget (< 4096
//     low, < 16384 medium, else high), adaptive → none unless
//     output_config.effort is set, disabled → none; output_config.effort
//     → reasoning_effort (xhigh and max → high) and wins over a budget;
//     output_config.format → response_format json_schema.
//   - context_management: clear_thinking edits are dropped (thinking never
//     reaches an OpenAI model); other edits are a FieldError. Tool strict
//     is kept, defer_loading dropped (every tool is offered up front); a
//     tool_reference in a tool result becomes a text line.
//
// # Responses API
//
// ParseResponses reads a Responses request into a ResponsesCall (stateless:
// previous_response_id, store true, conversation, prompt and item
// references are FieldErrors). ChatRequest builds the Chat Completions body
// (instructions → system, input items → messages, function_call and
// function_call_output items → tool_calls and tool messages, namespace
// tools flattened to namespace__name, reasoning and web_search_call items
// dropped, hosted and custom tools FieldErrors); AnthropicRequest pivots
// through it with OpenAIToAnthropicRequest and names the Responses fields
// in its errors. ChatResponse and AnthropicResponse build the Response
// object; NewChatStream and NewAnthropicStream the event stream
// (response.created … response.completed with sequence numbers). Chain
// composes two stream Translators through a middle format.
//
// # Token estimate
//
// CountTokens and EstimateTokens estimate the input tokens of a Messages
// body for count_tokens on providers that cannot count: TextTokens
// approximates a BPE tokenizer (within 15 % of o200k_base and cl100k_base
// on the fixtures), plus per-message and per-tool overheads, Anthropic's
// image formula and 2000 tokens per PDF page.
//
// # Responses and streams
//
// Anthropic stop reasons map end_turn/stop_sequence/pause_turn → stop,
// max_tokens/model_context_window_exceeded → length, tool_use → tool_calls,
// refusal → content_filter; the other way stop → end_turn, length →
// max_tokens, tool_calls/function_call → tool_use, content_filter → refusal.
// Usage: OpenAI prompt_tokens = Anthropic input + cache creation + cache
// read tokens, prompt_tokens_details.cached_tokens = cache read tokens; the
// other way input_tokens = prompt_tokens - cached_tokens. thinking ↔
// reasoning_content (OpenAI-compatible "reasoning" is read too); thinking
// signatures are dropped. Text blocks are joined with no separator, as a
// client concatenating stream deltas would see them.
//
// A stream translator never fabricates an ending: Finish closes the client
// stream only when the upstream already reported why it stopped, so a
// truncated upstream stays visibly truncated.
package translate
