package accesslog

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/breakwater-dev/breakwater/internal/runtime/internal/jsonenc"
)

// appendText appends l in hclog's text format: time, level, name, message,
// then " key=value" per field, as hclog's logPlain writes them without
// colour or caller location.
func (w *Writer) appendText(b []byte, t time.Time, l *Line) []byte {
	b = w.clock.appendTime(b, t)
	b = append(b, " [INFO]  "...)
	if w.name != "" {
		b = append(b, w.name...)
		b = append(b, ": "...)
	}
	b = append(b, "request:"...)
	b = appendTextString(b, "request_id", l.RequestID)
	b = appendTextString(b, "model", l.Model)
	b = appendTextString(b, "provider", l.Provider)
	b = appendTextString(b, "connection", l.Connection)
	b = appendTextInt(b, "attempts", int64(l.Attempts))
	b = appendTextInt(b, "status", int64(l.Status))
	b = appendTextString(b, "code", l.Code)
	b = append(b, " stream="...)
	b = strconv.AppendBool(b, l.Stream)
	b = appendTextInt(b, "upstream_ms", l.Upstream.Milliseconds())
	b = appendTextInt(b, "total_ms", l.Total.Milliseconds())
	return append(b, '\n')
}

func appendTextInt(b []byte, key string, v int64) []byte {
	b = append(b, ' ')
	b = append(b, key...)
	b = append(b, '=')
	return strconv.AppendInt(b, v, 10)
}

// appendTextString appends " key=value" as hclog writes a string field:
// an empty value as "", a value of plain characters ('-' to '~') as it is,
// a value with a newline as an indented block, anything else quoted with
// hclog's escapes.
func appendTextString(b []byte, key, v string) []byte {
	switch {
	case v == "":
		b = append(b, ' ')
		b = append(b, key...)
		return append(b, `=""`...)
	case plain(v):
		b = append(b, ' ')
		b = append(b, key...)
		b = append(b, '=')
		return append(b, v...)
	case strings.IndexByte(v, '\n') >= 0:
		b = append(b, "\n  "...)
		b = append(b, key...)
		b = append(b, "=\n"...)
		for {
			nl := strings.IndexByte(v, '\n')
			if nl < 0 {
				if v != "" {
					b = append(b, "  | "...)
					b = appendEscaped(b, v, false)
					b = append(b, '\n')
				}
				break
			}
			b = append(b, "  | "...)
			b = appendEscaped(b, v[:nl], false)
			b = append(b, '\n')
			v = v[nl+1:]
		}
		return append(b, "  "...)
	default:
		b = append(b, ' ')
		b = append(b, key...)
		b = append(b, `="`...)
		b = appendEscaped(b, v, true)
		return append(b, '"')
	}
}

// plain reports that every byte of s is one hclog writes unquoted: '-'
// (0x2D) to '~' (0x7E).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x2D || c > 0x7E {
			return false
		}
	}
	return true
}

const lowerhex = "0123456789abcdef"

// appendEscaped appends s as hclog's writeEscapedForOutput writes it: as
// it is when every character is printable and none is a quote; else each
// character printable (invalid UTF-8 as U+FFFD), a quote escaped when
// quotes is set, and the others as \a \b \f \n \r \t \v, \xHH, \uHHHH or
// \UHHHHHHHH.
func appendEscaped(b []byte, s string, quotes bool) []byte {
	if !needsEscaping(s) {
		return append(b, s...)
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case quotes && r == '"':
			b = append(b, '\\', '"')
		case unicode.IsPrint(r):
			b = utf8.AppendRune(b, r)
		case r == '\a':
			b = append(b, `\a`...)
		case r == '\b':
			b = append(b, `\b`...)
		case r == '\f':
			b = append(b, `\f`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r == '\v':
			b = append(b, `\v`...)
		case r < ' ':
			b = append(b, '\\', 'x', lowerhex[byte(r)>>4], lowerhex[byte(r)&0xF])
		case r < 0x10000:
			b = append(b, '\\', 'u')
			for s := 12; s >= 0; s -= 4 {
				b = append(b, lowerhex[r>>uint(s)&0xF])
			}
		default:
			b = append(b, '\\', 'U')
			for s := 28; s >= 0; s -= 4 {
				b = append(b, lowerhex[r>>uint(s)&0xF])
			}
		}
	}
	return b
}

func needsEscaping(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) || r == '"' {
			return true
		}
	}
	return false
}

// appendJSON appends l as hclog's JSON format writes it: one object whose
// keys are in sorted order (hclog encodes a map), HTML characters escaped,
// and a newline.
func (w *Writer) appendJSON(b []byte, t time.Time, l *Line) []byte {
	b = append(b, `{"@level":"info","@message":"request",`...)
	if w.name != "" {
		b = append(b, `"@module":`...)
		b = jsonenc.AppendStringStd(b, w.name)
		b = append(b, ',')
	}
	b = append(b, `"@timestamp":"`...)
	b = w.clock.appendTime(b, t)
	b = append(b, `","attempts":`...)
	b = strconv.AppendInt(b, int64(l.Attempts), 10)
	b = append(b, `,"code":`...)
	b = jsonenc.AppendStringStd(b, l.Code)
	b = append(b, `,"connection":`...)
	b = jsonenc.AppendStringStd(b, l.Connection)
	b = append(b, `,"model":`...)
	b = jsonenc.AppendStringStd(b, l.Model)
	b = append(b, `,"provider":`...)
	b = jsonenc.AppendStringStd(b, l.Provider)
	b = append(b, `,"request_id":`...)
	b = jsonenc.AppendStringStd(b, l.RequestID)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(l.Status), 10)
	b = append(b, `,"stream":`...)
	b = strconv.AppendBool(b, l.Stream)
	b = append(b, `,"total_ms":`...)
	b = strconv.AppendInt(b, l.Total.Milliseconds(), 10)
	b = append(b, `,"upstream_ms":`...)
	b = strconv.AppendInt(b, l.Upstream.Milliseconds(), 10)
	return append(b, "}\n"...)
}
