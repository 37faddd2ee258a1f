// Package coding decodes HTTP content codings (Content-Encoding) with a
// bound on the decoded size. The gateway decodes what it receives itself,
// in both directions: an upstream answer compressed although nobody asked
// for it (runtime/upstream), and a client request body a proxy compressed
// on its way in (runtime/server). A decompression bomb — a few kilobytes
// that inflate to gigabytes — stops at the bound.
//
// Only one layer of gzip (x-gzip) or deflate is decoded: a stacked coding
// ("gzip, gzip") or any other coding (br, zstd, compress) is refused, so
// the work per received byte stays bounded and no decoder beyond the
// standard library's is exposed to hostile input.
//
// The functions are goroutine-safe.
package coding

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"
)

var (
	// ErrTooLarge is returned when the decoded body exceeds its bound.
	ErrTooLarge = errors.New("decoded body exceeds its limit")
	// ErrCorrupt is returned when the body does not decode.
	ErrCorrupt = errors.New("body does not decode")
)

// Parse reads a Content-Encoding header value. It returns "" for none
// (or identity) and the lower-cased coding ("gzip", "x-gzip", "deflate")
// for one it decodes. For anything else — another coding, or more than
// one layer — ok is false and coding is a short, safe rendering of the
// value for messages (letters, digits, '-', ',' and spaces; at most 24
// bytes): never the raw header.
func Parse(v string) (coding string, ok bool) {
	v = strings.ToLower(strings.TrimSpace(v))
	switch v {
	case "", "identity":
		return "", true
	case "gzip", "x-gzip", "deflate":
		return v, true
	}
	return safeDetail(v), false
}

// safeDetail cuts a header value to a short token for messages.
func safeDetail(v string) string {
	if len(v) > 24 {
		v = v[:24]
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == ',' || r == ' ' {
			return r
		}
		return '?'
	}, v)
}

// NewReader returns a reader of r decoded from coding (a coding Parse
// accepts). "deflate" is the zlib format of RFC 9110, with a fallback to
// raw deflate, which some servers send instead. An empty r yields io.EOF.
func NewReader(coding string, r io.Reader) (io.ReadCloser, error) {
	switch coding {
	case "gzip", "x-gzip":
		return gzip.NewReader(r)
	case "deflate":
		br := bufio.NewReader(r)
		h, err := br.Peek(2)
		if err != nil {
			return nil, err
		}
		if h[0]&0x0f == 8 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 {
			return zlib.NewReader(br)
		}
		return flate.NewReader(br), nil
	}
	return nil, fmt.Errorf("coding %q", coding)
}

// DecodeAll decodes a whole body compressed with coding (a coding Parse
// accepts), reading at most limit+1 decoded bytes: a body that decodes to
// more than limit bytes fails with ErrTooLarge, one that does not decode
// with ErrCorrupt. An empty body decodes to itself.
func DecodeAll(coding string, body []byte, limit int64) ([]byte, error) {
	if len(body) == 0 {
		return body, nil
	}
	d, err := NewReader(coding, bytes.NewReader(body))
	if err != nil {
		return nil, ErrCorrupt
	}
	defer d.Close()
	var out bytes.Buffer
	// Most bodies compress 3 to 10 times; start there, never past limit.
	out.Grow(int(min(int64(len(body))*4, limit+1)))
	n, err := out.ReadFrom(io.LimitReader(d, limit+1))
	switch {
	case err != nil:
		return nil, ErrCorrupt
	case n > limit:
		return nil, ErrTooLarge
	}
	return out.Bytes(), nil
}

// IsCorrupt reports whether err, read from a NewReader, says the body does
// not decode (as opposed to a failure of the underlying reader).
func IsCorrupt(err error) bool {
	var fe flate.CorruptInputError
	return errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, zlib.ErrHeader) ||
		errors.Is(err, zlib.ErrChecksum) || errors.Is(err, zlib.ErrDictionary) || errors.As(err, &fe)
}
