package translate

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif" // image.DecodeConfig for GIF images
	_ "image/jpeg"
	_ "image/png"
	"unicode"
	"unicode/utf8"
)

// Token estimate for POST /v1/messages/count_tokens on providers that have
// no counting endpoint. It is an approximation of a BPE tokenizer (OpenAI's
// o200k_base and cl100k_base, Anthropic's): see EstimateTokens for the
// rules and docs/compatibility.md for the measured error on the fixtures.

// Structural overheads of the estimate, in tokens.
const (
	tokensPerRequest = 3 // reply priming
	tokensPerMessage = 4 // role and separators of a message (or the system prompt)
	tokensPerTool    = 8 // the framing of one tool definition
	tokensPerBlock   = 3 // a tool_use or tool_result wrapper
	// imageTokensMax is the estimate for an image whose size is unknown
	// (a URL, or a format the estimate does not decode): Anthropic's
	// ceiling for a resized image (about 1.15 megapixels / 750).
	imageTokensMax = 1600
	// pdfTokensPerPage is the estimate per PDF page (Anthropic documents
	// 1,500–3,000 text tokens per page plus the page image).
	pdfTokensPerPage = 2000
)

// CountTokens answers a count_tokens request (an Anthropic Messages body;
// model and max_tokens are not needed) with {"input_tokens": N}, N from
// EstimateTokens. A malformed body is a *FieldError naming the field.
func CountTokens(body []byte) ([]byte, error) {
	n, err := EstimateTokens(body)
	if err != nil {
		return nil, err
	}
	b := append([]byte(`{"input_tokens":`), appendInt(nil, n)...)
	return append(b, '}'), nil
}

// EstimateTokens estimates the input tokens of an Anthropic Messages body:
// text (system, text blocks, tool inputs, tool results, tool names,
// descriptions and schemas) by TextTokens; 4 tokens per message and for
// the system prompt, 3 per tool_use or tool_result block, 8 per tool, 3
// for the reply; images by Anthropic's formula (width × height / 750 after
// scaling the long edge to 1568 px, read from the PNG, JPEG or GIF header;
// 1600 when the size is unknown); PDF documents 2000 tokens per page.
// Thinking blocks of earlier turns are not counted (they are not sent to
// the model again). The estimate is pure and deterministic.
func EstimateTokens(body []byte) (int, error) {
	p, err := tokenPartsOf(body)
	if err != nil {
		return 0, err
	}
	n := p.other
	for _, t := range p.texts {
		n += TextTokens(t)
	}
	return n, nil
}

// tokenParts is a request's estimate split into the text pieces TextTokens
// counts and the tokens of everything else (overheads, images, PDFs).
type tokenParts struct {
	texts []string
	other int
}

func (p *tokenParts) text(s string) {
	if s != "" {
		p.texts = append(p.texts, s)
	}
}

// tokenPartsOf walks a Messages body.
func tokenPartsOf(body []byte) (tokenParts, error) {
	p := tokenParts{other: tokensPerRequest}
	var in anRequest
	if err := decodeBody(body, &in); err != nil {
		return p, err
	}
	if rawKind(in.System) != 'n' {
		sys, err := anSystemText(in.System, "system")
		if err != nil {
			return p, err
		}
		p.other += tokensPerMessage
		p.text(sys)
	}
	for i, m := range in.Messages {
		blocks, err := anBlocks(m.Content, fmt.Sprintf("messages[%d].content", i))
		if err != nil {
			return p, err
		}
		p.other += tokensPerMessage
		for _, b := range blocks {
			p.block(b)
		}
	}
	for _, t := range in.Tools {
		p.other += tokensPerTool
		p.text(t.Name)
		p.text(t.Description)
		if rawKind(t.InputSchema) == 'o' {
			if schema, err := compactJSON(t.InputSchema); err == nil {
				p.text(string(schema))
			}
		}
	}
	return p, nil
}

// block adds one content block.
func (p *tokenParts) block(b anBlock) {
	switch b.Type {
	case "text":
		p.text(b.Text)
	case "image":
		p.other += imageTokens(b.source())
	case "document":
		src := b.source()
		switch {
		case src == nil:
		case src.Type == "text":
			p.text(src.Data)
		case src.Type == "base64":
			p.other += pdfTokens(src.Data)
		default:
			p.other += pdfTokensPerPage
		}
	case "tool_use":
		p.other += tokensPerBlock
		p.text(b.Name)
		if in, err := compactJSON(b.Input); err == nil {
			p.text(string(in))
		}
	case "tool_result":
		p.other += tokensPerBlock
		switch rawKind(b.Content) {
		case 's':
			var s string
			_ = json.Unmarshal(b.Content, &s)
			p.text(s)
		case 'a':
			var inner []anBlock
			if json.Unmarshal(b.Content, &inner) == nil {
				for _, ib := range inner {
					p.block(ib)
				}
			}
		}
	case "tool_reference":
		p.text(b.ToolName)
	case "thinking", "redacted_thinking":
		// stripped by the model's provider in earlier turns
	default:
		p.text(b.Text)
	}
}

// imageTokens applies Anthropic's image formula to a base64 image whose
// header the standard library decodes.
func imageTokens(src *anSource) int {
	if src == nil || src.Type != "base64" {
		return imageTokensMax
	}
	// The header is in the first bytes; decode a bounded prefix.
	prefix := src.Data
	if len(prefix) > 64<<10 {
		prefix = prefix[:64<<10]
	}
	raw, err := base64.StdEncoding.DecodeString(prefix[:len(prefix)/4*4])
	if err != nil {
		return imageTokensMax
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return imageTokensMax
	}
	w, h := float64(cfg.Width), float64(cfg.Height)
	const longEdge = 1568
	if m := max(w, h); m > longEdge {
		w, h = w*longEdge/m, h*longEdge/m
	}
	return min(max(int(w*h/750+0.5), 1), imageTokensMax)
}

// pdfTokens counts the pages of a base64 PDF (its /Type /Page objects).
func pdfTokens(data string) int {
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return pdfTokensPerPage
	}
	pages := 0
	for i := 0; ; {
		j := bytes.Index(raw[i:], []byte("/Type"))
		if j < 0 {
			break
		}
		i += j + len("/Type")
		rest := bytes.TrimLeft(raw[i:], " \r\n\t")
		if bytes.HasPrefix(rest, []byte("/Page")) && !bytes.HasPrefix(rest, []byte("/Pages")) {
			pages++
		}
	}
	return max(pages, 1) * pdfTokensPerPage
}

// TextTokens estimates the BPE tokens of text: a run of ASCII letters
// counts one token per started 10 letters (BPE vocabularies hold most
// English words, with their leading space, as one token), a run of digits
// one per started 3, a run of other ASCII punctuation one per started 4
// (JSON's `":"` and `","` are single tokens), whitespace after the first
// space one per started 4 (indentation, blank lines), CJK, kana and
// Hangul characters one each, other letters (accented Latin, Cyrillic,
// Greek…) one per started 3, and anything else (emoji, symbols) 2 per
// character. The constants were fitted on the fixtures and checked on
// whole recorded Claude Code requests (docs/compatibility.md).
func TextTokens(s string) int {
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r < utf8.RuneSelf && isASCIILetter(byte(r)):
			j := i
			for j < len(s) && isASCIILetter(s[j]) {
				j++
			}
			n += (j - i + 9) / 10
			i = j
			continue
		case r >= '0' && r <= '9':
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			n += (j - i + 2) / 3
			i = j
			continue
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			j := i + 1
			for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
				j++
			}
			// a single separator joins the next token; longer runs
			// (indentation, blank lines) cost about one per 4.
			n += (j - i - 1 + 3) / 4
			i = j
			continue
		case r < utf8.RuneSelf:
			j := i
			for j < len(s) && isASCIIPunct(s[j]) {
				j++
			}
			n += (j - i + 3) / 4
			i = j
			continue
		case isCJK(r):
			n++
		case unicode.IsLetter(r) || unicode.IsMark(r):
			j := i
			k := 0
			for j < len(s) {
				r2, sz := utf8.DecodeRuneInString(s[j:])
				if r2 < utf8.RuneSelf || isCJK(r2) || !(unicode.IsLetter(r2) || unicode.IsMark(r2)) {
					break
				}
				j += sz
				k++
			}
			n += (k + 2) / 3
			i = j
			continue
		default:
			n += 2
		}
		i += size
	}
	return n
}

func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// isASCIIPunct reports an ASCII byte that is not a letter, digit or
// whitespace.
func isASCIIPunct(c byte) bool {
	return c < utf8.RuneSelf && !isASCIILetter(c) && (c < '0' || c > '9') && c != ' ' && c != '\t' && c != '\n' && c != '\r'
}

func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// countTokensText returns the text pieces EstimateTokens runs through
// TextTokens, for measuring the estimate against a real tokenizer.
func countTokensText(body []byte) ([]string, error) {
	p, err := tokenPartsOf(body)
	return p.texts, err
}
