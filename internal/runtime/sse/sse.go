// Package sse reads and writes Server-Sent Events streams, the framing of
// every streamed LLM API response (OpenAI Chat Completions and Responses,
// Anthropic Messages).
//
// The Reader is built for the relay hot path: it keeps one growable buffer,
// returns events whose byte slices alias that buffer (valid until the next
// call to Next), bounds line and event size, and accepts LF, CRLF and lone
// CR line endings and input that arrives in arbitrarily small pieces.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Size bounds of a Reader.
const (
	// MaxLineSize bounds one line of a stream, terminator excluded.
	MaxLineSize = 4 << 20
	// MaxEventSize bounds one event, every line and terminator included.
	MaxEventSize = 8 << 20

	initialBufSize = 512
	maxNames       = 64
)

// ErrTooLong is returned (wrapped) by Reader.Next when a line exceeds
// MaxLineSize or an event exceeds MaxEventSize. The stream cannot be
// resynchronised after it.
var ErrTooLong = errors.New("sse: line or event too long")

// Event is one SSE event: a block of lines ended by a blank line.
//
// Events returned by Reader.Next alias the reader's buffer: Data and Raw are
// valid only until the next call to Next. Copy what must outlive it.
type Event struct {
	// Event is the value of the "event:" field ("" when absent).
	Event string
	// Data is the value of the "data:" lines, joined with "\n" when there
	// are several; for a comment-only block, the comment text.
	Data []byte
	// ID is the value of the "id:" field ("" when absent).
	ID string
	// Comment is true when the block held only comment (":") lines, the
	// usual shape of a keep-alive.
	Comment bool
	// Raw is the exact bytes of the block as received, including its
	// terminating blank line, for pass-through. Nil on events built by hand.
	Raw []byte
}

// Reader reads events from an SSE stream. It is not goroutine-safe.
type Reader struct {
	r        io.Reader
	buf      []byte
	off, end int // unread bytes are buf[off:end]
	err      error
	data     []byte // scratch for multi-line data
	names    map[string]string
}

// NewReader returns a Reader reading from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: r}
}

// span is a byte range relative to the start of the event being read, so
// it survives compaction of the buffer.
type span struct{ lo, hi int }

// Next returns the next non-blank block of the stream. Blocks a browser
// would not dispatch (comments, a lone "retry:") are returned too, so a
// relay can pass them through; leading blank lines are skipped.
//
// At the end of the stream Next returns io.EOF, or io.ErrUnexpectedEOF when
// the stream ended inside an unterminated block (which is discarded, as the
// SSE specification requires). Other read errors are returned wrapped; a
// line or event over the size bounds yields an error wrapping ErrTooLong.
// Errors are sticky.
func (r *Reader) Next() (Event, error) {
	if r.off == r.end {
		r.off, r.end = 0, 0
	}
	evStart := r.off
	pos := r.off
	var (
		name, id        span
		hasName, hasID  bool
		data            span
		dataLines       int
		commentLines    int
		fieldLines      int
		firstCommentPos span
	)
	r.data = r.data[:0]
	scan := pos // bytes before scan hold no line terminator
	for {
		i := lineEnd(r.buf[scan:r.end])
		if i >= 0 {
			i += scan - pos
		}
		if i < 0 || (r.buf[pos+i] == '\r' && pos+i+1 == r.end && r.err == nil) {
			// No complete line is buffered (a CR at the very end may be the
			// first half of a CRLF): read more.
			if r.end-pos > MaxLineSize {
				r.err = fmt.Errorf("sse: line over %d bytes: %w", MaxLineSize, ErrTooLong)
				return Event{}, r.err
			}
			if r.err != nil {
				return Event{}, r.endErr(evStart)
			}
			scan = r.end
			if i >= 0 {
				scan = pos + i
			}
			shift, err := r.fill(evStart)
			if err != nil {
				return Event{}, err
			}
			evStart -= shift
			pos -= shift
			scan -= shift
			continue
		}
		eol := pos + i
		if i > MaxLineSize {
			r.err = fmt.Errorf("sse: line over %d bytes: %w", MaxLineSize, ErrTooLong)
			return Event{}, r.err
		}
		next := eol + 1
		if r.buf[eol] == '\r' && next < r.end && r.buf[next] == '\n' {
			next++
		}
		line := r.buf[pos:eol]
		if len(line) == 0 {
			if pos == evStart {
				// A blank line before any content: skip it.
				evStart, pos, scan = next, next, next
				r.off = next
				continue
			}
			r.off = next
			return r.build(evStart, next, name, hasName, id, hasID, data, dataLines, commentLines, fieldLines, firstCommentPos), nil
		}
		if line[0] == ':' {
			commentLines++
			if fieldLines == 0 {
				// Comment text matters only for a comment-only block.
				v := line[1:]
				if len(v) > 0 && v[0] == ' ' {
					v = v[1:]
				}
				if commentLines == 1 {
					firstCommentPos = span{lo: eol - len(v) - evStart, hi: eol - evStart}
				} else {
					if commentLines == 2 {
						r.data = append(r.data, r.buf[evStart+firstCommentPos.lo:evStart+firstCommentPos.hi]...)
					}
					r.data = append(r.data, '\n')
					r.data = append(r.data, v...)
				}
			}
			pos, scan = next, next
			continue
		}
		fieldLines++
		field, value := line, line[len(line):]
		if c := bytes.IndexByte(line, ':'); c >= 0 {
			field, value = line[:c], line[c+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		vs := span{lo: eol - len(value) - evStart, hi: eol - evStart}
		switch string(field) {
		case "data":
			dataLines++
			switch dataLines {
			case 1:
				data = vs
			case 2:
				r.data = append(r.data[:0], r.buf[evStart+data.lo:evStart+data.hi]...)
				fallthrough
			default:
				r.data = append(r.data, '\n')
				r.data = append(r.data, value...)
			}
		case "event":
			name, hasName = vs, true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				id, hasID = vs, true
			}
		}
		pos, scan = next, next
	}
}

// lineEnd returns the index of the first CR or LF in b, or -1.
func lineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	head := b
	if i >= 0 {
		head = b[:i]
	}
	if j := bytes.IndexByte(head, '\r'); j >= 0 {
		return j
	}
	return i
}

// build assembles the event held in buf[evStart:end].
func (r *Reader) build(evStart, end int, name span, hasName bool, id span, hasID bool, data span, dataLines, commentLines, fieldLines int, firstComment span) Event {
	b := r.buf[evStart:end:end]
	ev := Event{Raw: b}
	if hasName {
		ev.Event = r.intern(b[name.lo:name.hi])
	}
	if hasID {
		ev.ID = string(b[id.lo:id.hi])
	}
	switch {
	case dataLines == 1:
		ev.Data = b[data.lo:data.hi:data.hi]
	case dataLines > 1:
		ev.Data = r.data
	case fieldLines == 0 && commentLines > 0:
		ev.Comment = true
		if commentLines == 1 {
			ev.Data = b[firstComment.lo:firstComment.hi:firstComment.hi]
		} else {
			ev.Data = r.data
		}
	}
	return ev
}

// intern returns the string for an event name, sharing the few names a
// stream repeats instead of allocating one per event.
func (r *Reader) intern(b []byte) string {
	if s, ok := r.names[string(b)]; ok {
		return s
	}
	s := string(b)
	if r.names == nil {
		r.names = make(map[string]string, 8)
	}
	if len(r.names) < maxNames {
		r.names[s] = s
	}
	return s
}

// endErr reports the end of the stream given the sticky read error; the
// bytes of an unterminated block are discarded.
func (r *Reader) endErr(evStart int) error {
	if r.err != io.EOF {
		return r.err
	}
	r.off = r.end
	if len(bytes.Trim(r.buf[evStart:r.end], "\r\n")) > 0 {
		r.err = io.ErrUnexpectedEOF
	}
	return r.err
}

// Await blocks until more input arrives when none is buffered (the state
// of an idle stream between two events); Next then returns the event as
// usual. It lets a caller wait in a shallow frame rather than deep in
// Next, so that the stack of a goroutine parked on an idle stream can
// shrink. A read error is kept for Next to return.
func (r *Reader) Await() {
	if r.off < r.end || r.err != nil {
		return
	}
	r.off, r.end = 0, 0
	_, _ = r.fill(0)
}

// fill reads more input, first making room by moving the event being read
// (from evStart) to the front of the buffer or by growing the buffer. It
// returns how far the buffered bytes moved left.
func (r *Reader) fill(evStart int) (shift int, err error) {
	if r.buf == nil {
		r.buf = make([]byte, initialBufSize)
	}
	if evStart > 0 && len(r.buf)-r.end < len(r.buf)/2 {
		copy(r.buf, r.buf[evStart:r.end])
		shift = evStart
		r.end -= shift
		r.off = max(r.off-shift, 0)
	}
	if r.end == len(r.buf) {
		if len(r.buf) >= MaxEventSize {
			r.err = fmt.Errorf("sse: event over %d bytes: %w", MaxEventSize, ErrTooLong)
			return 0, r.err
		}
		nb := make([]byte, min(2*len(r.buf), MaxEventSize))
		copy(nb, r.buf[:r.end])
		r.buf = nb
	}
	for range 100 {
		n, rerr := r.r.Read(r.buf[r.end:])
		r.end += n
		if rerr != nil {
			if rerr == io.EOF {
				r.err = io.EOF
			} else {
				r.err = fmt.Errorf("sse: reading stream: %w", rerr)
			}
			return shift, nil
		}
		if n > 0 {
			return shift, nil
		}
	}
	r.err = fmt.Errorf("sse: reading stream: %w", io.ErrNoProgress)
	return shift, nil
}

// AppendEvent appends ev in SSE framing to dst and returns the extended
// slice. It writes the fields (never Raw): "event:", "id:", one "data:"
// line per line of Data, and the terminating blank line; a Comment event
// is written as ":" lines. Line breaks inside field values (CR, LF, CRLF)
// start a new line of the same field, so the framing stays intact.
func AppendEvent(dst []byte, ev Event) []byte {
	if ev.Comment {
		dst = appendLines(dst, ":", ev.Data)
		return append(dst, '\n')
	}
	if ev.Event != "" {
		dst = appendLines(dst, "event:", []byte(ev.Event))
	}
	if ev.ID != "" {
		dst = appendLines(dst, "id:", []byte(ev.ID))
	}
	if ev.Data != nil || (ev.Event == "" && ev.ID == "") {
		dst = appendLines(dst, "data:", ev.Data)
	}
	return append(dst, '\n')
}

// appendLines writes prefix+" "+line+"\n" for each line of v.
func appendLines(dst []byte, prefix string, v []byte) []byte {
	for {
		i := bytes.IndexAny(v, "\r\n")
		line := v
		if i >= 0 {
			line = v[:i]
		}
		dst = append(dst, prefix...)
		if len(line) > 0 {
			dst = append(dst, ' ')
			dst = append(dst, line...)
		}
		dst = append(dst, '\n')
		if i < 0 {
			return dst
		}
		if v[i] == '\r' && i+1 < len(v) && v[i+1] == '\n' {
			i++
		}
		v = v[i+1:]
	}
}
