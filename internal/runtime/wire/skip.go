package wire

// SkipValue checks the one JSON value that starts at b[i] (no whitespace
// before it) exactly as Valid checks a value nested in depth containers,
// and returns the index just past it. ok is false when the value does not
// follow the grammar (or nests deeper than encoding/json allows). It lets
// a reader that walks some containers itself (frames' answer readers)
// check the values it does not read in the same single pass.
func SkipValue(b []byte, i, depth int) (end int, ok bool) {
	s := scanner{b: b, i: i, depth: depth}
	if s.skipValue() != nil {
		return s.i, false
	}
	return s.i, true
}
