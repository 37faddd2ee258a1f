package upstream

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// writeRequest writes req to w as http.Request.Write does, byte for byte,
// for the requests a direct route sends (leanRequest): a body of known
// length (or none),
// a plain host, header names that are tokens and values without line
// breaks or surrounding blanks. It appends the request's head in one pass
// instead of the standard library's general writer (transfer-encoding
// probing, a sorted copy of the header, a replacer per value), which is a
// good part of the time a stream's first byte waits on before the
// upstream call leaves. Any other request goes through req.Write.
func writeRequest(w *bufio.Writer, req *http.Request) error {
	host, ok := leanRequest(req)
	if !ok {
		return req.Write(w)
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	head := w.AvailableBuffer()
	head = append(head, method...)
	head = append(head, ' ')
	head = append(head, req.URL.RequestURI()...)
	head = append(head, " HTTP/1.1\r\nHost: "...)
	head = append(head, host...)
	head = append(head, "\r\nUser-Agent: "...)
	if ua, set := req.Header["User-Agent"]; set {
		if len(ua) > 0 {
			head = append(head, ua[0]...)
		}
	} else {
		head = append(head, goUserAgent...)
	}
	head = append(head, "\r\n"...)
	if req.ContentLength > 0 || req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch {
		head = append(head, "Content-Length: "...)
		head = strconv.AppendInt(head, req.ContentLength, 10)
		head = append(head, "\r\n"...)
	}
	var keys [16]string
	names := sortedNames(keys[:0], req.Header)
	for _, k := range names {
		for _, v := range req.Header[k] {
			head = append(head, k...)
			head = append(head, ": "...)
			head = append(head, v...)
			head = append(head, "\r\n"...)
		}
	}
	head = append(head, "\r\n"...)
	if _, err := w.Write(head); err != nil {
		return err
	}
	if req.Body == nil {
		return nil
	}
	n, err := io.CopyN(w, req.Body, req.ContentLength)
	req.Body.Close()
	if err != nil {
		return err
	}
	if n != req.ContentLength {
		return http.ErrContentLength
	}
	return nil
}

// goUserAgent is the User-Agent http.Request.Write sends when the header
// has none.
const goUserAgent = "Go-http-client/1.1"

// leanRequest reports whether writeRequest may write req itself, and the
// Host it sends: no User-Agent line to leave out (an empty value), no
// trailer, no transfer coding, no Connection: close to add, a body whose
// length is known, and names and values that the standard library would
// write unchanged.
func leanRequest(req *http.Request) (string, bool) {
	if req.URL == nil || req.Method == http.MethodConnect || req.Close || len(req.TransferEncoding) > 0 || req.Trailer != nil {
		return "", false
	}
	if req.Body == nil || req.Body == http.NoBody {
		if req.ContentLength != 0 || req.Body == http.NoBody {
			return "", false
		}
	} else if req.ContentLength <= 0 {
		return "", false
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if host == "" || !plainHost(host) {
		return "", false
	}
	if ua, set := req.Header["User-Agent"]; set && (len(ua) == 0 || ua[0] == "" || !plainValue(ua[0])) {
		return "", false
	}
	for k, vv := range req.Header {
		if !wire.ValidHeaderName(k) {
			return "", false
		}
		for _, v := range vv {
			if !plainValue(v) {
				return "", false
			}
		}
	}
	return host, true
}

// excluded are the header names http.Request.Write writes itself or
// leaves out.
func excluded(name string) bool {
	switch name {
	case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
		return true
	}
	return false
}

// sortedNames appends h's names, but the excluded ones, to dst in sorted
// order (insertion sort: a request has a handful).
func sortedNames(dst []string, h http.Header) []string {
	for k := range h {
		if excluded(k) {
			continue
		}
		i := len(dst)
		dst = append(dst, k)
		for ; i > 0 && dst[i-1] > k; i-- {
			dst[i] = dst[i-1]
		}
		dst[i] = k
	}
	return dst
}

// plainHost reports whether a Host value needs none of the cleaning
// http.Request.Write applies: letters, digits and the punctuation of
// names, IPv4 and bracketed IPv6 addresses and ports, no zone.
func plainHost(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.' || c == '-' || c == ':' || c == '[' || c == ']' || c == '_':
		default:
			return false
		}
	}
	return true
}

// plainValue reports whether http.Request.Write writes a header value as
// it is: no line break to replace, no blank to trim at either end.
func plainValue(s string) bool {
	if s == "" {
		return true
	}
	if s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return false
	}
	return strings.IndexByte(s, '\r') < 0 && strings.IndexByte(s, '\n') < 0
}
