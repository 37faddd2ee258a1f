// Package orchestrate implements the routing strategies that make more than
// one upstream call for one client request (docs/resilience.md §13): fusion (a
// panel answers in parallel, a judge synthesises one answer), pipeline
// (sequential steps, each step's output feeds the next) and context-relay
// (a long conversation that moves to another target carries a compact
// summary of its earlier turns).
//
// # Wire format and the executor
//
// Everything here is OpenAI Chat Completions JSON, non-streaming: the
// gateway translates other client formats before and after, and turns the
// returned chat.completion into a stream when the client asked for one.
// The package never does HTTP itself. It calls an Exec the server provides,
// which runs one request against one Target with all of the gateway's
// resilience behind it (failover, cooldowns, breakers) and replaces the
// body's model field with the target's upstream model. An Exec must honour
// ctx cancellation, must not modify the body it is given and must be safe
// for concurrent use (fusion calls it from several goroutines).
//
// # Request rewriting
//
// Bodies are rewritten as maps of raw JSON fields: every field this package
// does not touch (temperature, tools, response_format, vendor extensions,
// unknown per-message fields) is sent on unchanged. Fusion and pipeline
// requests always carry "stream": false and drop "stream_options" (which
// upstreams reject on a non-stream request). Field order is not preserved.
//
// # Usage and model of the returned completion
//
// Fusion and Pipeline return the chat.completion of their final call with
// two fields replaced: "model" is the model name the client asked for
// (FusionConfig.Model / PipelineConfig.Model, or the request's own model
// field when that is empty) and "usage" is the field-wise sum of the usage
// objects of every call that succeeded (panel members, judge, steps):
// numbers are added, nested objects such as prompt_tokens_details are
// summed the same way, other values keep the first one seen. Failed calls
// return no usage and add nothing. When no call reported usage, the final
// completion's usage is left as it is.
//
// # Concurrency
//
// Every function is safe for concurrent use; configurations are read, never
// modified. Fusion starts at most FusionConfig.MaxParallel goroutines and
// waits for all of them before it returns, so no goroutine outlives a call.
package orchestrate
