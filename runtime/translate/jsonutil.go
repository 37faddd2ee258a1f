package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// marshal encodes v without HTML escaping (the bodies are not HTML).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decodeBody unmarshals a request body, turning decoding failures into a
// FieldError naming the offending field.
func decodeBody(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "body"
			}
			return fieldErr(field, "must be %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
		}
		return fieldErr("body", "request body is not valid JSON")
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "a boolean"
	case "float64", "int", "int64":
		return "a number"
	case "ptr":
		return "a value of another type"
	}
	return goKind
}

// rawKind reports the JSON kind of raw: 'n' null or absent, 's' string,
// 'a' array, 'o' object, or another first byte.
func rawKind(raw json.RawMessage) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 'n'
	}
	switch raw[0] {
	case 'n':
		return 'n'
	case '"':
		return 's'
	case '[':
		return 'a'
	case '{':
		return 'o'
	}
	return raw[0]
}

// compactJSON returns raw without insignificant whitespace.
func compactJSON(raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// appendString appends s as a JSON string literal. Control characters,
// quotes, backslashes, invalid UTF-8 (as U+FFFD) and U+2028/U+2029 are
// escaped, so the output is always valid JSON.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendInt(b []byte, n int) []byte { return strconv.AppendInt(b, int64(n), 10) }

// textOf returns the text of an OpenAI content value: a string, or an array
// of parts whose text parts (text, input_text, output_text, refusal) are
// concatenated. Other part types are an error naming field.
func textOf(raw json.RawMessage, field string) (string, error) {
	switch rawKind(raw) {
	case 'n':
		return "", nil
	case 's':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fieldErr(field, "invalid string")
		}
		return s, nil
	case 'a':
		var parts []struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Refusal string `json:"refusal"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", fieldErr(field, "must be a string or an array of text parts")
		}
		var out []byte
		for i, p := range parts {
			switch p.Type {
			case "text", "input_text", "output_text":
				out = append(out, p.Text...)
			case "refusal":
				out = append(out, p.Refusal...)
			default:
				return "", fieldErr(fmt.Sprintf("%s[%d].type", field, i), "part type %q is not supported here; only text", p.Type)
			}
		}
		return string(out), nil
	}
	return "", fieldErr(field, "must be a string or an array of text parts")
}
