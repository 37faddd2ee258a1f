package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/breakwater-dev/breakwater/internal/runtime/internal/jsonenc"
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

// appendString appends s as a JSON string literal.
func appendString(b []byte, s string) []byte { return jsonenc.AppendString(b, s) }

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
