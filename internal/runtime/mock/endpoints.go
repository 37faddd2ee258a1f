package mock

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"math"
	"strconv"
)

// The other endpoints clients call: Anthropic count_tokens, OpenAI
// embeddings and legacy completions. They are generation endpoints for
// the script (faults apply) and the counters.

// defaultEmbeddingDims is the length of an embedding when the request
// does not ask for dimensions.
const defaultEmbeddingDims = 8

// maxEmbeddingDims bounds the dimensions a request may ask for.
const maxEmbeddingDims = 4096

// countTokensWhole is {"input_tokens": N}: the prompt tokens the mock
// reports for the same body on /v1/messages.
func (c *call) countTokensWhole(b []byte) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(c.promptTokens), 10)
	return append(b, "}\n"...)
}

// embeddingInputs returns the texts of an embeddings input: a string, an
// array of strings, or token arrays (each embedded as its JSON text).
func embeddingInputs(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return []string{s}
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil
	}
	if len(items) > 0 && items[0][0] != '"' && items[0][0] != '[' {
		return []string{string(raw)} // one token array
	}
	out := make([]string, len(items))
	for i, it := range items {
		if it[0] == '"' {
			_ = json.Unmarshal(it, &out[i])
		} else {
			out[i] = string(it)
		}
	}
	return out
}

// embedding is a deterministic unit vector for text.
func embedding(text string, dims int) []float32 {
	v := make([]float32, dims)
	var norm float64
	for i := range v {
		h := fnv.New64a()
		_, _ = h.Write([]byte(text))
		_, _ = h.Write([]byte{byte(i), byte(i >> 8)})
		x := float64(h.Sum64()%2001)/1000 - 1
		v[i] = float32(x)
		norm += x * x
	}
	if norm == 0 {
		v[0], norm = 1, 1
	}
	n := float32(math.Sqrt(norm))
	for i := range v {
		v[i] /= n
	}
	return v
}

// embeddingsWhole is an OpenAI embeddings list; encoding_format base64
// sends each vector as little-endian float32 bytes in base64 (what the
// official SDKs ask for by default).
func (c *call) embeddingsWhole(b []byte) []byte {
	dims := c.dims
	if dims <= 0 || dims > maxEmbeddingDims {
		dims = defaultEmbeddingDims
	}
	b = append(b, `{"object":"list","data":[`...)
	for i, text := range c.inputs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		vec := embedding(text, dims)
		if c.base64 {
			raw := make([]byte, 4*len(vec))
			for k, x := range vec {
				binary.LittleEndian.PutUint32(raw[4*k:], math.Float32bits(x))
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, raw)
			b = append(b, '"')
		} else {
			b = append(b, '[')
			for k, x := range vec {
				if k > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendFloat(b, float64(x), 'g', 8, 32)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = appendJSONString(b, c.model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(c.promptTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(c.promptTokens), 10)
	return append(b, "}}\n"...)
}

// Legacy completions (text_completion).

func (c *call) cmHead(b []byte) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, c.id...)
	b = append(b, `","object":"text_completion","created":`...)
	b = strconv.AppendInt(b, c.created, 10)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, c.model)
	return append(b, `,"choices":[`...)
}

func (c *call) cmWhole(b []byte) []byte {
	b = c.cmHead(b)
	b = append(b, `{"text":`...)
	b = appendJSONString(b, c.text)
	b = append(b, `,"index":0,"logprobs":null,"finish_reason":"`...)
	b = append(b, c.finishReason()...)
	b = append(b, `"}],"usage":`...)
	b = c.oaUsage(b)
	return append(b, "}\n"...)
}

func (c *call) cmDelta(b []byte, piece string) []byte {
	b = append(b, "data: "...)
	b = c.cmHead(b)
	b = append(b, `{"text":`...)
	b = appendJSONString(b, piece)
	return append(b, `,"index":0,"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
}

func (c *call) cmFinish(b []byte) []byte {
	b = append(b, "data: "...)
	b = c.cmHead(b)
	b = append(b, `{"text":"","index":0,"logprobs":null,"finish_reason":"`...)
	b = append(b, c.finishReason()...)
	b = append(b, `"}]`...)
	if c.includeUsage {
		b = append(b, `,"usage":`...)
		b = c.oaUsage(b)
	}
	return append(b, "}\n\ndata: [DONE]\n\n"...)
}
