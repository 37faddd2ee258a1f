package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// The binary encoding is the alternative to JSON for guests that declare
// FeatureBinary (the Go SDK does). It exists because decoding JSON costs a
// WebAssembly guest far more than the hook's own logic; the binary form is
// read with no copy beyond one of the whole input. Layout (see the package
// documentation for the field order of each type):
//
//	int     8 bytes, little-endian two's complement
//	string  u32 little-endian byte length, then the bytes (UTF-8)
//	map     u32 little-endian pair count, then count × (string key, string value)
//
// A value is the concatenation of its fields in declaration order, with no
// padding and nothing after the last field.

// errShort is returned when a binary value ends before its last field.
var errShort = errors.New("binary value truncated")

// binaryStringLen is the encoded size of s (a capacity hint: replacing
// invalid UTF-8 may change it).
func binaryStringLen(s string) int { return 4 + len(s) }

func binaryMapLen(m map[string]string) int {
	n := 4
	for k, v := range m {
		n += binaryStringLen(k) + binaryStringLen(v)
	}
	return n
}

// appendBinaryString appends s, with each invalid UTF-8 sequence replaced
// by U+FFFD: guests may rely on valid UTF-8 without checking it.
func appendBinaryString(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func appendBinaryInt(b []byte, v int64) []byte {
	return binary.LittleEndian.AppendUint64(b, uint64(v))
}

func appendBinaryMap(b []byte, m map[string]string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m)))
	for k, v := range m {
		b = appendBinaryString(b, k)
		b = appendBinaryString(b, v)
	}
	return b
}

// AppendErrorInputBinary appends the binary encoding of v to b.
func AppendErrorInputBinary(b []byte, v *ErrorInput) []byte {
	if b == nil {
		b = make([]byte, 0, binaryStringLen(v.Provider)+binaryStringLen(v.Connection)+
			binaryStringLen(v.Model)+binaryStringLen(v.Profile)+8+binaryMapLen(v.Headers)+
			binaryStringLen(v.ErrorCode)+binaryStringLen(v.ErrorType)+binaryStringLen(v.Body))
	}
	b = appendBinaryString(b, v.Provider)
	b = appendBinaryString(b, v.Connection)
	b = appendBinaryString(b, v.Model)
	b = appendBinaryString(b, v.Profile)
	b = appendBinaryInt(b, int64(v.Status))
	b = appendBinaryMap(b, v.Headers)
	b = appendBinaryString(b, v.ErrorCode)
	b = appendBinaryString(b, v.ErrorType)
	return appendBinaryString(b, v.Body)
}

// AppendRestatementBinary appends the binary encoding of v to b.
func AppendRestatementBinary(b []byte, v *Restatement) []byte {
	b = appendBinaryInt(b, int64(v.Status))
	b = appendBinaryInt(b, v.RetryAfterMS)
	return appendBinaryString(b, v.RuleID)
}

// AppendDecisionBinary appends the binary encoding of v to b.
func AppendDecisionBinary(b []byte, v *Decision) []byte {
	b = appendBinaryString(b, v.Reason)
	b = appendBinaryString(b, v.Scope)
	b = appendBinaryInt(b, v.CooldownMS)
	return appendBinaryString(b, v.RuleID)
}

// AppendRequestInfoBinary appends the binary encoding of v to b.
func AppendRequestInfoBinary(b []byte, v *RequestInfo) []byte {
	if b == nil {
		b = make([]byte, 0, binaryStringLen(v.Model)+binaryStringLen(v.Path)+
			binaryStringLen(v.KeyID)+binaryMapLen(v.Headers))
	}
	b = appendBinaryString(b, v.Model)
	b = appendBinaryString(b, v.Path)
	b = appendBinaryString(b, v.KeyID)
	return appendBinaryMap(b, v.Headers)
}

// AppendRequestActionBinary appends the binary encoding of v to b.
func AppendRequestActionBinary(b []byte, v *RequestAction) []byte {
	b = appendBinaryString(b, v.Model)
	b = appendBinaryMap(b, v.SetHeaders)
	b = appendBinaryInt(b, int64(v.RejectStatus))
	return appendBinaryString(b, v.RejectMessage)
}

// binaryReader reads the fields of one binary value. The first error
// sticks; later reads return zero values.
type binaryReader struct {
	b   []byte
	err error
	// intern maps a field's text to a canonical string so that answers
	// naming a known constant do not allocate; nil interns nothing.
	intern map[string]string
}

func (r *binaryReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *binaryReader) u32() uint32 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 4 {
		r.fail(errShort)
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *binaryReader) int64() int64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.fail(errShort)
		return 0
	}
	v := int64(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

// int reads an int field that must fit an int32 (statuses).
func (r *binaryReader) int(field string) int {
	v := r.int64()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail(fmt.Errorf("%s %d out of range", field, v))
		return 0
	}
	return int(v)
}

// bytes returns the next string field's bytes (a view of the input).
func (r *binaryReader) bytes(field string) []byte {
	n := r.u32()
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)) {
		r.fail(fmt.Errorf("%s: %w", field, errShort))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	if !utf8.Valid(v) {
		r.fail(fmt.Errorf("%s is not valid UTF-8", field))
		return nil
	}
	return v
}

func (r *binaryReader) str(field string) string {
	v := r.bytes(field)
	if len(v) == 0 {
		return ""
	}
	if r.intern != nil {
		if s, ok := r.intern[string(v)]; ok {
			return s
		}
	}
	return string(v)
}

func (r *binaryReader) strMap(field string) map[string]string {
	n := r.u32()
	if r.err != nil || n == 0 {
		return nil
	}
	if uint64(n)*8 > uint64(len(r.b)) {
		r.fail(fmt.Errorf("%s: %d pairs: %w", field, n, errShort))
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := r.str(field + " key")
		v := r.str(field + " value")
		if r.err != nil {
			return nil
		}
		m[k] = v
	}
	return m
}

// end reports the first error, or an error when bytes are left over.
func (r *binaryReader) end() error {
	if r.err == nil && len(r.b) != 0 {
		return fmt.Errorf("%d bytes after the last field", len(r.b))
	}
	return r.err
}

// DecodeErrorInputBinary decodes the binary encoding of an ErrorInput.
func DecodeErrorInputBinary(b []byte) (ErrorInput, error) {
	r := binaryReader{b: b}
	v := ErrorInput{
		Provider:   r.str("provider"),
		Connection: r.str("connection"),
		Model:      r.str("model"),
		Profile:    r.str("profile"),
		Status:     r.int("status"),
		Headers:    r.strMap("headers"),
		ErrorCode:  r.str("error_code"),
		ErrorType:  r.str("error_type"),
		Body:       r.str("body"),
	}
	return v, r.end()
}

// DecodeRestatementBinary decodes the binary encoding of a Restatement.
func DecodeRestatementBinary(b []byte) (Restatement, error) {
	r := binaryReader{b: b}
	v := Restatement{Status: r.int("status"), RetryAfterMS: r.int64(), RuleID: r.str("rule_id")}
	return v, r.end()
}

// DecodeDecisionBinary decodes the binary encoding of a Decision. Reason
// and Scope strings naming one of known are returned as that string, not a
// copy (pass nil to copy everything).
func DecodeDecisionBinary(b []byte, known map[string]string) (Decision, error) {
	r := binaryReader{b: b, intern: known}
	v := Decision{Reason: r.str("reason"), Scope: r.str("scope")}
	r.intern = nil
	v.CooldownMS = r.int64()
	v.RuleID = r.str("rule_id")
	return v, r.end()
}

// DecodeRequestInfoBinary decodes the binary encoding of a RequestInfo.
func DecodeRequestInfoBinary(b []byte) (RequestInfo, error) {
	r := binaryReader{b: b}
	v := RequestInfo{Model: r.str("model"), Path: r.str("path"), KeyID: r.str("key_id"), Headers: r.strMap("headers")}
	return v, r.end()
}

// DecodeRequestActionBinary decodes the binary encoding of a RequestAction.
func DecodeRequestActionBinary(b []byte) (RequestAction, error) {
	r := binaryReader{b: b}
	v := RequestAction{
		Model:         r.str("model"),
		SetHeaders:    r.strMap("set_headers"),
		RejectStatus:  r.int("reject_status"),
		RejectMessage: r.str("reject_message"),
	}
	return v, r.end()
}

// The route hook's types (ABI 1.2) add three forms to the layout:
//
//	bool    1 byte, 0 or 1
//	float   8 bytes, the IEEE 754 binary64 bits little-endian
//	list    u32 little-endian element count, then the elements

func appendBinaryBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendBinaryFloat(b []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

// AppendRouteInputBinary appends the binary encoding of v to b.
func AppendRouteInputBinary(b []byte, v *RouteInput) []byte {
	q := &v.Request
	if b == nil {
		n := binaryStringLen(q.Model) + binaryStringLen(q.Combo) + 1 + binaryStringLen(q.KeyID) +
			binaryMapLen(q.Headers) + 16 + 4
		for i := range v.Candidates {
			c := &v.Candidates[i]
			n += binaryStringLen(c.Provider) + binaryStringLen(c.Model) + binaryStringLen(c.Connection) +
				1 + binaryStringLen(c.Health) + 7*8
		}
		b = make([]byte, 0, n)
	}
	b = appendBinaryString(b, q.Model)
	b = appendBinaryString(b, q.Combo)
	b = appendBinaryBool(b, q.Stream)
	b = appendBinaryString(b, q.KeyID)
	b = appendBinaryMap(b, q.Headers)
	b = appendBinaryInt(b, int64(q.ToolCount))
	b = appendBinaryInt(b, int64(q.PromptTokens))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v.Candidates)))
	for i := range v.Candidates {
		c := &v.Candidates[i]
		b = appendBinaryString(b, c.Provider)
		b = appendBinaryString(b, c.Model)
		b = appendBinaryString(b, c.Connection)
		b = appendBinaryBool(b, c.Eligible)
		b = appendBinaryString(b, c.Health)
		b = appendBinaryInt(b, c.CooldownMS)
		b = appendBinaryInt(b, c.LockoutMS)
		b = appendBinaryFloat(b, c.Headroom)
		b = appendBinaryInt(b, c.LatencyMS)
		b = appendBinaryInt(b, int64(c.InFlight))
		b = appendBinaryFloat(b, c.PriceIn)
		b = appendBinaryFloat(b, c.PriceOut)
	}
	return b
}

// AppendRouteAnswerBinary appends the binary encoding of v to b.
func AppendRouteAnswerBinary(b []byte, v *RouteAnswer) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v.Order)))
	for _, i := range v.Order {
		b = appendBinaryInt(b, int64(i))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v.Exclude)))
	for _, x := range v.Exclude {
		b = appendBinaryInt(b, int64(x.Index))
		b = appendBinaryString(b, x.Reason)
	}
	return appendBinaryString(b, v.RuleID)
}

func (r *binaryReader) bool(field string) bool {
	if r.err != nil {
		return false
	}
	if len(r.b) < 1 {
		r.fail(errShort)
		return false
	}
	v := r.b[0]
	r.b = r.b[1:]
	if v > 1 {
		r.fail(fmt.Errorf("%s: boolean byte %d is neither 0 nor 1", field, v))
		return false
	}
	return v == 1
}

func (r *binaryReader) float() float64 { return math.Float64frombits(uint64(r.int64())) }

// count reads a list's element count, refusing one that cannot fit in the
// bytes left when each element takes at least minSize bytes.
func (r *binaryReader) count(field string, minSize int) int {
	n := r.u32()
	if r.err != nil {
		return 0
	}
	if uint64(n)*uint64(minSize) > uint64(len(r.b)) {
		r.fail(fmt.Errorf("%s: %d elements: %w", field, n, errShort))
		return 0
	}
	return int(n)
}

// routeCandidateMinBytes is the encoded size of a RouteCandidate with
// empty strings.
const routeCandidateMinBytes = 4*4 + 1 + 7*8

// DecodeRouteInputBinary decodes the binary encoding of a RouteInput.
func DecodeRouteInputBinary(b []byte) (RouteInput, error) {
	r := binaryReader{b: b}
	var v RouteInput
	v.Request = RouteRequest{
		Model:        r.str("model"),
		Combo:        r.str("combo"),
		Stream:       r.bool("stream"),
		KeyID:        r.str("key_id"),
		Headers:      r.strMap("headers"),
		ToolCount:    r.int("tool_count"),
		PromptTokens: r.int("prompt_tokens"),
	}
	if n := r.count("candidates", routeCandidateMinBytes); n > 0 {
		v.Candidates = make([]RouteCandidate, n)
		for i := range v.Candidates {
			v.Candidates[i] = RouteCandidate{
				Provider:   r.str("provider"),
				Model:      r.str("model"),
				Connection: r.str("connection"),
				Eligible:   r.bool("eligible"),
				Health:     r.str("health"),
				CooldownMS: r.int64(),
				LockoutMS:  r.int64(),
				Headroom:   r.float(),
				LatencyMS:  r.int64(),
				InFlight:   r.int("in_flight"),
				PriceIn:    r.float(),
				PriceOut:   r.float(),
			}
		}
	}
	if err := r.end(); err != nil {
		return RouteInput{}, err
	}
	return v, nil
}

// DecodeRouteAnswerBinary decodes the binary encoding of a RouteAnswer.
func DecodeRouteAnswerBinary(b []byte) (RouteAnswer, error) {
	r := binaryReader{b: b}
	var v RouteAnswer
	if n := r.count("order", 8); n > 0 {
		v.Order = make([]int, n)
		for i := range v.Order {
			v.Order[i] = r.int("order")
		}
	}
	if n := r.count("exclude", 12); n > 0 {
		v.Exclude = make([]RouteExclusion, n)
		for i := range v.Exclude {
			v.Exclude[i] = RouteExclusion{Index: r.int("exclude index"), Reason: r.str("exclude reason")}
		}
	}
	v.RuleID = r.str("rule_id")
	if err := r.end(); err != nil {
		return RouteAnswer{}, err
	}
	return v, nil
}
