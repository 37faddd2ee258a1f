package wire

import (
	"strconv"
	"unicode/utf8"
)

// MaxEcho is the most bytes of a client-supplied value (a model name, a
// path) the gateway echoes into an error message or writes into a log
// line.
const MaxEcho = 256

// Clip returns s when it is at most MaxEcho bytes long, else its first
// MaxEcho bytes (cut at a character boundary) followed by a marker giving
// the full length, e.g. `aaaa…[+1048320 bytes]`. It allocates only when
// it cuts.
func Clip(s string) string {
	if len(s) <= MaxEcho {
		return s
	}
	cut := MaxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…[+" + strconv.Itoa(len(s)-cut) + " bytes]"
}
