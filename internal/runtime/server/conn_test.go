package server

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// fasthttp's read errors get the status and code of what went wrong,
// never internal_error, and a message of the gateway's own.
func TestConnErrorAnswer(t *testing.T) {
	leak := "Authorization: Bearer admin-token-do-not-echo"
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{&fasthttp.ErrSmallBuffer{}, 431, "request_header_fields_too_large"},
		{fmt.Errorf("reading body: %w", fasthttp.ErrBodyTooLarge), 413, "request_too_large"},
		{fmt.Errorf("read tcp: %w", os.ErrDeadlineExceeded), 408, "request_timeout"},
		{fasthttp.ErrTimeout, 408, "request_timeout"},
		{fasthttp.ErrGetOnly, 405, "method_not_allowed"},
		{errors.New("error when reading request headers: " + leak), 400, "malformed_request"},
		{fasthttp.ErrBrokenChunk{}, 400, "malformed_request"},
	} {
		e := connErrorAnswer(c.err, 1024)
		if e.Status != c.status || e.Code != c.code {
			t.Errorf("%v: %d %s, want %d %s", c.err, e.Status, e.Code, c.status, c.code)
		}
		if b := string(e.Body(0)); len(b) == 0 || strings.Contains(b, "admin-token") || strings.Contains(b, "reading") {
			t.Errorf("%v: body %s quotes the error", c.err, b)
		}
	}
}
