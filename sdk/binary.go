package sdk

import "math"

// This file is the SDK's copy of the host's binary hook encoding (ABI 1.1,
// FeatureBinary; see plugins/abi/binary.go in the gateway, which a host
// test holds this copy to). An int is 8 bytes little-endian; a string is a
// u32 little-endian length and its bytes; a map is a u32 little-endian
// pair count and its (key, value) strings. A value is its fields in
// declaration order with nothing after the last.
//
// The host sends valid UTF-8 only, so decoding does not check it (the
// guest pays for every byte it looks at). Decoding copies the input once
// into a string and slices every string field from it, so a handler may keep what it is given (a kept field keeps
// the whole input alive until it is dropped).

// errDecode describes why an input could not be decoded.
type errDecode string

func (e errDecode) Error() string { return string(e) }

const (
	errTruncated = errDecode("input truncated")
	errTrailing  = errDecode("bytes after the last field")
	errRange     = errDecode("integer out of range")
)

func appendU32(b []byte, v uint32) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

func appendInt(b []byte, v int64) []byte {
	u := uint64(v)
	return append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24), byte(u>>32), byte(u>>40), byte(u>>48), byte(u>>56))
}

func appendString(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}

func appendMap(b []byte, m map[string]string) []byte {
	b = appendU32(b, uint32(len(m)))
	for k, v := range m {
		b = appendString(b, k)
		b = appendString(b, v)
	}
	return b
}

func appendHeaders(b []byte, h Headers) []byte {
	b = appendU32(b, uint32(h.n))
	return append(b, h.enc...)
}

func appendErrorInput(b []byte, v *ErrorInput) []byte {
	b = appendString(b, v.Provider)
	b = appendString(b, v.Connection)
	b = appendString(b, v.Model)
	b = appendString(b, v.Profile)
	b = appendInt(b, int64(v.Status))
	b = appendHeaders(b, v.Headers)
	b = appendString(b, v.ErrorCode)
	b = appendString(b, v.ErrorType)
	return appendString(b, v.Body)
}

func appendRestatement(b []byte, v *Restatement) []byte {
	b = appendInt(b, int64(v.Status))
	b = appendInt(b, v.RetryAfterMS)
	return appendString(b, v.RuleID)
}

func appendDecision(b []byte, v *Decision) []byte {
	b = appendString(b, v.Reason)
	b = appendString(b, v.Scope)
	b = appendInt(b, v.CooldownMS)
	return appendString(b, v.RuleID)
}

func appendRequestInfo(b []byte, v *RequestInfo) []byte {
	b = appendString(b, v.Model)
	b = appendString(b, v.Path)
	b = appendString(b, v.KeyID)
	return appendHeaders(b, v.Headers)
}

func appendRequestAction(b []byte, v *RequestAction) []byte {
	b = appendString(b, v.Model)
	b = appendMap(b, v.SetHeaders)
	b = appendInt(b, int64(v.RejectStatus))
	return appendString(b, v.RejectMessage)
}

// reader reads the fields of one value from s; the first error sticks and
// later reads return zero values.
type reader struct {
	s   string
	err error
}

func (r *reader) u32() uint32 {
	if r.err != nil {
		return 0
	}
	if len(r.s) < 4 {
		r.err = errTruncated
		return 0
	}
	v := uint32(r.s[0]) | uint32(r.s[1])<<8 | uint32(r.s[2])<<16 | uint32(r.s[3])<<24
	r.s = r.s[4:]
	return v
}

func (r *reader) int64() int64 {
	if r.err != nil {
		return 0
	}
	if len(r.s) < 8 {
		r.err = errTruncated
		return 0
	}
	var u uint64
	for i := 7; i >= 0; i-- {
		u = u<<8 | uint64(r.s[i])
	}
	r.s = r.s[8:]
	return int64(u)
}

// int reads an int that must fit an int32 (statuses).
func (r *reader) int() int {
	v := r.int64()
	if v < -1<<31 || v > 1<<31-1 {
		if r.err == nil {
			r.err = errRange
		}
		return 0
	}
	return int(v)
}

func (r *reader) str() string {
	n := r.u32()
	if r.err != nil {
		return ""
	}
	if uint64(n) > uint64(len(r.s)) {
		r.err = errTruncated
		return ""
	}
	v := r.s[:n]
	r.s = r.s[n:]
	return v
}

func (r *reader) strMap() map[string]string {
	n := r.u32()
	if r.err != nil || n == 0 {
		return nil
	}
	if uint64(n)*8 > uint64(len(r.s)) {
		r.err = errTruncated
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := r.str()
		v := r.str()
		if r.err != nil {
			return nil
		}
		m[k] = v
	}
	return m
}

// headers checks the encoded pairs and returns them in place.
func (r *reader) headers() Headers {
	n := r.u32()
	if r.err != nil || n == 0 {
		return Headers{}
	}
	if uint64(n)*8 > uint64(len(r.s)) {
		r.err = errTruncated
		return Headers{}
	}
	start := r.s
	for range 2 * n {
		r.str()
		if r.err != nil {
			return Headers{}
		}
	}
	return Headers{enc: start[:len(start)-len(r.s)], n: int(n)}
}

func (r *reader) end() error {
	if r.err == nil && len(r.s) != 0 {
		return errTrailing
	}
	return r.err
}

func decodeErrorInput(b []byte, v *ErrorInput) error {
	r := reader{s: string(b)}
	*v = ErrorInput{
		Provider:   r.str(),
		Connection: r.str(),
		Model:      r.str(),
		Profile:    r.str(),
		Status:     r.int(),
		Headers:    r.headers(),
		ErrorCode:  r.str(),
		ErrorType:  r.str(),
		Body:       r.str(),
	}
	return r.end()
}

func decodeRestatement(b []byte, v *Restatement) error {
	r := reader{s: string(b)}
	*v = Restatement{Status: r.int(), RetryAfterMS: r.int64(), RuleID: r.str()}
	return r.end()
}

func decodeDecision(b []byte, v *Decision) error {
	r := reader{s: string(b)}
	*v = Decision{Reason: r.str(), Scope: r.str(), CooldownMS: r.int64(), RuleID: r.str()}
	return r.end()
}

func decodeRequestInfo(b []byte, v *RequestInfo) error {
	r := reader{s: string(b)}
	*v = RequestInfo{Model: r.str(), Path: r.str(), KeyID: r.str(), Headers: r.headers()}
	return r.end()
}

func decodeRequestAction(b []byte, v *RequestAction) error {
	r := reader{s: string(b)}
	*v = RequestAction{Model: r.str(), SetHeaders: r.strMap(), RejectStatus: r.int(), RejectMessage: r.str()}
	return r.end()
}

// The route hook's types add three forms: a bool is one byte (0 or 1), a
// float the 8 bytes of its IEEE 754 bits little-endian, a list a u32
// little-endian count followed by the elements.

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendFloat(b []byte, v float64) []byte { return appendInt(b, int64(math.Float64bits(v))) }

func appendRouteInput(b []byte, v *RouteInput) []byte {
	q := &v.Request
	b = appendString(b, q.Model)
	b = appendString(b, q.Combo)
	b = appendBool(b, q.Stream)
	b = appendString(b, q.KeyID)
	b = appendHeaders(b, q.Headers)
	b = appendInt(b, int64(q.ToolCount))
	b = appendInt(b, int64(q.PromptTokens))
	b = appendU32(b, uint32(len(v.Candidates)))
	for i := range v.Candidates {
		c := &v.Candidates[i]
		b = appendString(b, c.Provider)
		b = appendString(b, c.Model)
		b = appendString(b, c.Connection)
		b = appendBool(b, c.Eligible)
		b = appendString(b, c.Health)
		b = appendInt(b, c.CooldownMS)
		b = appendInt(b, c.LockoutMS)
		b = appendFloat(b, c.Headroom)
		b = appendInt(b, c.LatencyMS)
		b = appendInt(b, int64(c.InFlight))
		b = appendFloat(b, c.PriceIn)
		b = appendFloat(b, c.PriceOut)
	}
	return b
}

func appendRouteAnswer(b []byte, v *RouteAnswer) []byte {
	b = appendU32(b, uint32(len(v.Order)))
	for _, i := range v.Order {
		b = appendInt(b, int64(i))
	}
	b = appendU32(b, uint32(len(v.Exclude)))
	for _, x := range v.Exclude {
		b = appendInt(b, int64(x.Index))
		b = appendString(b, x.Reason)
	}
	return appendString(b, v.RuleID)
}

func (r *reader) bool() bool {
	if r.err != nil {
		return false
	}
	if len(r.s) < 1 {
		r.err = errTruncated
		return false
	}
	v := r.s[0]
	r.s = r.s[1:]
	if v > 1 {
		r.err = errRange
		return false
	}
	return v == 1
}

func (r *reader) float() float64 { return math.Float64frombits(uint64(r.int64())) }

// count reads a list's element count, refusing one whose elements of at
// least minSize bytes each cannot fit in what is left.
func (r *reader) count(minSize int) int {
	n := r.u32()
	if r.err != nil {
		return 0
	}
	if uint64(n)*uint64(minSize) > uint64(len(r.s)) {
		r.err = errTruncated
		return 0
	}
	return int(n)
}

// routeCandidateMinBytes is the encoded size of a candidate with empty
// strings.
const routeCandidateMinBytes = 4*4 + 1 + 7*8

func decodeRouteInput(b []byte, v *RouteInput) error {
	r := reader{s: string(b)}
	*v = RouteInput{Request: RouteRequest{
		Model:        r.str(),
		Combo:        r.str(),
		Stream:       r.bool(),
		KeyID:        r.str(),
		Headers:      r.headers(),
		ToolCount:    r.int(),
		PromptTokens: r.int(),
	}}
	if n := r.count(routeCandidateMinBytes); n > 0 {
		v.Candidates = make([]RouteCandidate, n)
		for i := range v.Candidates {
			v.Candidates[i] = RouteCandidate{
				Provider:   r.str(),
				Model:      r.str(),
				Connection: r.str(),
				Eligible:   r.bool(),
				Health:     r.str(),
				CooldownMS: r.int64(),
				LockoutMS:  r.int64(),
				Headroom:   r.float(),
				LatencyMS:  r.int64(),
				InFlight:   r.int(),
				PriceIn:    r.float(),
				PriceOut:   r.float(),
			}
		}
	}
	return r.end()
}

func decodeRouteAnswer(b []byte, v *RouteAnswer) error {
	r := reader{s: string(b)}
	*v = RouteAnswer{}
	if n := r.count(8); n > 0 {
		v.Order = make([]int, n)
		for i := range v.Order {
			v.Order[i] = r.int()
		}
	}
	if n := r.count(12); n > 0 {
		v.Exclude = make([]RouteExclusion, n)
		for i := range v.Exclude {
			v.Exclude[i] = RouteExclusion{Index: r.int(), Reason: r.str()}
		}
	}
	v.RuleID = r.str()
	return r.end()
}
