package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// got is a copied Event, comparable across reads.
type got struct {
	Event, Data, ID, Raw string
	Comment              bool
}

func readAll(t *testing.T, r io.Reader) ([]got, error) {
	t.Helper()
	rd := NewReader(r)
	var out []got
	for {
		ev, err := rd.Next()
		if err != nil {
			return out, err
		}
		out = append(out, got{Event: ev.Event, Data: string(ev.Data), ID: ev.ID, Raw: string(ev.Raw), Comment: ev.Comment})
		if len(out) > 10000 {
			t.Fatal("runaway reader")
		}
	}
}

func TestReaderEvents(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []got
		err  error
	}{
		{
			name: "openai chunks and done",
			in:   "data: {\"a\":1}\n\ndata: [DONE]\n\n",
			want: []got{
				{Data: `{"a":1}`, Raw: "data: {\"a\":1}\n\n"},
				{Data: "[DONE]", Raw: "data: [DONE]\n\n"},
			},
			err: io.EOF,
		},
		{
			name: "anthropic event and data",
			in:   "event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n",
			want: []got{
				{Event: "message_start", Data: `{"type":"message_start"}`, Raw: "event: message_start\ndata: {\"type\":\"message_start\"}\n\n"},
				{Event: "ping", Data: `{"type": "ping"}`, Raw: "event: ping\ndata: {\"type\": \"ping\"}\n\n"},
			},
			err: io.EOF,
		},
		{
			name: "crlf",
			in:   "event: a\r\ndata: x\r\n\r\ndata: y\r\n\r\n",
			want: []got{
				{Event: "a", Data: "x", Raw: "event: a\r\ndata: x\r\n\r\n"},
				{Data: "y", Raw: "data: y\r\n\r\n"},
			},
			err: io.EOF,
		},
		{
			name: "lone cr",
			in:   "data: x\r\rdata: y\r\r",
			want: []got{{Data: "x", Raw: "data: x\r\r"}, {Data: "y", Raw: "data: y\r\r"}},
			err:  io.EOF,
		},
		{
			name: "multi-line data",
			in:   "data: one\ndata:two\ndata:  three\n\n",
			want: []got{{Data: "one\ntwo\n three", Raw: "data: one\ndata:two\ndata:  three\n\n"}},
			err:  io.EOF,
		},
		{
			name: "comment only",
			in:   ": ping\n\n:\n\n: a\n:b\n\n",
			want: []got{
				{Data: "ping", Comment: true, Raw: ": ping\n\n"},
				{Data: "", Comment: true, Raw: ":\n\n"},
				{Data: "a\nb", Comment: true, Raw: ": a\n:b\n\n"},
			},
			err: io.EOF,
		},
		{
			name: "comments mixed with fields",
			in:   ": c1\n: c2\ndata: a\n: c3\ndata: b\n\n",
			want: []got{{Data: "a\nb", Raw: ": c1\n: c2\ndata: a\n: c3\ndata: b\n\n"}},
			err:  io.EOF,
		},
		{
			name: "leading blank lines skipped",
			in:   "\n\r\n\ndata: x\n\n\n\n",
			want: []got{{Data: "x", Raw: "data: x\n\n"}},
			err:  io.EOF,
		},
		{
			name: "id, retry, unknown fields, no-colon field",
			in:   "id: 7\nretry: 100\nfoo: bar\ndata\n\nretry: 5\n\nid: a\x00b\ndata: z\n\n",
			want: []got{
				{ID: "7", Data: "", Raw: "id: 7\nretry: 100\nfoo: bar\ndata\n\n"},
				{Raw: "retry: 5\n\n"},
				{Data: "z", Raw: "id: a\x00b\ndata: z\n\n"},
			},
			err: io.EOF,
		},
		{
			name: "unterminated last event",
			in:   "data: a\n\ndata: [DONE]\n",
			want: []got{{Data: "a", Raw: "data: a\n\n"}},
			err:  io.ErrUnexpectedEOF,
		},
		{
			name: "unterminated partial line",
			in:   "data: a\n\ndata: {\"choi",
			want: []got{{Data: "a", Raw: "data: a\n\n"}},
			err:  io.ErrUnexpectedEOF,
		},
		{
			name: "empty stream",
			in:   "",
			err:  io.EOF,
		},
		{
			name: "only blank lines",
			in:   "\n\n\r\n",
			err:  io.EOF,
		},
	}
	readers := map[string]func(string) io.Reader{
		"whole":        func(s string) io.Reader { return strings.NewReader(s) },
		"byte-by-byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half":         func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
		"data-err-eof": func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) },
	}
	for _, tt := range tests {
		for rname, mk := range readers {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				evs, err := readAll(t, mk(tt.in))
				if err != tt.err {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				if len(evs) != len(tt.want) {
					t.Fatalf("got %d events %+v, want %d %+v", len(evs), evs, len(tt.want), tt.want)
				}
				for i := range evs {
					if evs[i] != tt.want[i] {
						t.Errorf("event %d = %+v, want %+v", i, evs[i], tt.want[i])
					}
				}
			})
		}
	}
}

// A CR at the end of one read and the LF at the start of the next are one
// line terminator, not a line plus a blank line.
func TestReaderCRLFSplitAcrossReads(t *testing.T) {
	r := io.MultiReader(strings.NewReader("data: a\r"), strings.NewReader("\ndata: b\r"), strings.NewReader("\n\r"), strings.NewReader("\n"))
	evs, err := readAll(t, r)
	if err != io.EOF {
		t.Fatalf("err = %v", err)
	}
	if len(evs) != 1 || evs[0].Data != "a\nb" {
		t.Fatalf("events = %+v, want one event with data a\\nb", evs)
	}
}

func TestReaderLongLines(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	in := "data: " + big + "\n\ndata: small\n\n"
	for _, r := range []io.Reader{strings.NewReader(in), iotest.HalfReader(strings.NewReader(in))} {
		evs, err := readAll(t, r)
		if err != io.EOF || len(evs) != 2 || evs[0].Data != big || evs[1].Data != "small" {
			t.Fatalf("err=%v n=%d", err, len(evs))
		}
	}

	// One line over MaxLineSize, with or without its terminator buffered.
	for _, tail := range []string{"", "\n\n"} {
		huge := "data: " + strings.Repeat("y", MaxLineSize) + tail
		rd := NewReader(strings.NewReader("data: ok\n\n" + huge))
		if ev, err := rd.Next(); err != nil || string(ev.Data) != "ok" {
			t.Fatalf("first event: %v", err)
		}
		_, err := rd.Next()
		if !errors.Is(err, ErrTooLong) {
			t.Fatalf("tail %q: err = %v, want ErrTooLong", tail, err)
		}
		if _, err2 := rd.Next(); !errors.Is(err2, ErrTooLong) {
			t.Fatalf("error not sticky: %v", err2)
		}
	}

	// An event over MaxEventSize made of lines under MaxLineSize.
	line := "data: " + strings.Repeat("z", MaxLineSize-100) + "\n"
	_, err := readAll(t, strings.NewReader(line+line+line+"\n"))
	if !errors.Is(err, ErrTooLong) {
		t.Fatalf("err = %v, want ErrTooLong", err)
	}
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom))
	evs, err := readAll(t, r)
	if len(evs) != 1 || !errors.Is(err, boom) {
		t.Fatalf("events %+v err %v", evs, err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestReaderNoProgress(t *testing.T) {
	_, err := NewReader(zeroReader{}).Next()
	if !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("err = %v", err)
	}
}

// Many small events through a small buffer exercise compaction: events
// must come out intact whatever the read sizes.
func TestReaderCompaction(t *testing.T) {
	var b strings.Builder
	var want []string
	for i := range 3000 {
		d := strings.Repeat(string(rune('a'+i%26)), i%700)
		want = append(want, d)
		b.WriteString("event: e\ndata: " + d + "\n\n")
	}
	for _, r := range []io.Reader{strings.NewReader(b.String()), iotest.HalfReader(strings.NewReader(b.String()))} {
		evs, err := readAll(t, r)
		if err != io.EOF || len(evs) != len(want) {
			t.Fatalf("err=%v n=%d", err, len(evs))
		}
		for i := range evs {
			if evs[i].Data != want[i] || evs[i].Event != "e" {
				t.Fatalf("event %d corrupted", i)
			}
		}
	}
}

func TestAppendEvent(t *testing.T) {
	tests := []struct {
		ev   Event
		want string
	}{
		{Event{Data: []byte(`{"a":1}`)}, "data: {\"a\":1}\n\n"},
		{Event{Event: "error", Data: []byte(`{}`)}, "event: error\ndata: {}\n\n"},
		{Event{Event: "x", ID: "9", Data: []byte("a\nb\r\nc\rd")}, "event: x\nid: 9\ndata: a\ndata: b\ndata: c\ndata: d\n\n"},
		{Event{Comment: true, Data: []byte("ping")}, ": ping\n\n"},
		{Event{Comment: true}, ":\n\n"},
		{Event{Data: []byte{}}, "data:\n\n"},
		{Event{}, "data:\n\n"},
		{Event{Event: "only"}, "event: only\n\n"},
		// Raw is never used by AppendEvent.
		{Event{Data: []byte("x"), Raw: []byte("junk")}, "data: x\n\n"},
	}
	for _, tt := range tests {
		if got := string(AppendEvent(nil, tt.ev)); got != tt.want {
			t.Errorf("AppendEvent(%+v) = %q, want %q", tt.ev, got, tt.want)
		}
	}
}

func TestAppendEventRoundTrip(t *testing.T) {
	evs := []Event{
		{Event: "content_block_delta", Data: []byte(`{"type":"content_block_delta"}`)},
		{Data: []byte("line1\nline2")},
		{ID: "abc", Data: []byte("x")},
		{Comment: true, Data: []byte("keep-alive\nsecond")},
	}
	var buf []byte
	for _, ev := range evs {
		buf = AppendEvent(buf, ev)
	}
	got, err := readAll(t, bytes.NewReader(buf))
	if err != io.EOF || len(got) != len(evs) {
		t.Fatalf("err=%v got=%+v", err, got)
	}
	for i, ev := range evs {
		if got[i].Event != ev.Event || got[i].Data != string(ev.Data) || got[i].ID != ev.ID || got[i].Comment != ev.Comment {
			t.Errorf("event %d: got %+v, want %+v", i, got[i], ev)
		}
	}
}

// pieces reads b in pieces of n bytes (at least 1).
type pieces struct {
	b []byte
	n int
}

func (p *pieces) Read(dst []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	k := copy(dst[:min(len(dst), p.n)], p.b)
	p.b = p.b[k:]
	return k, nil
}

// FuzzReader checks that the events of a stream and the way it ends do not
// depend on how its bytes arrive (whole, byte by byte, or in pieces of any
// size), that Raw always re-parses to the same event, and that AppendEvent
// writes an event so that it reads back the same.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: a\n\n", "event: x\r\ndata: y\r\n\r\n", ": c\n\ndata: 1\ndata: 2\n\n", "data: a\r\rdata: b\r\n\r\n", "id: 1\n\n\n",
		"data: {\"a\":1}\n\ndata: [DONE]\n\n",
		"event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n",
		": keepalive\n\n: keepalive\n\n", "id: 7\nretry: 100\n\n", "data:no-space\nevent:\n\n", "data: truncated",
		"event: e\nid: a\x00b\ndata: 1\ndata: 2\n\n",
	} {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, in string, piece uint8) {
		a, errA := readAll(t, strings.NewReader(in))
		b, errB := readAll(t, iotest.OneByteReader(strings.NewReader(in)))
		c, errC := readAll(t, &pieces{b: []byte(in), n: int(piece%64) + 1})
		if !errors.Is(errA, io.EOF) && !errors.Is(errA, io.ErrUnexpectedEOF) {
			t.Fatalf("end of a stream read whole: %v", errA)
		}
		if errA != errB || errA != errC || len(a) != len(b) || len(a) != len(c) {
			t.Fatalf("whole: %+v %v; byte: %+v %v; pieces of %d: %+v %v", a, errA, b, errB, piece%64+1, c, errC)
		}
		for i := range a {
			if a[i] != b[i] || a[i] != c[i] {
				t.Fatalf("event %d: %+v vs %+v vs %+v", i, a[i], b[i], c[i])
			}
			again, _ := readAll(t, strings.NewReader(a[i].Raw))
			if len(again) != 1 || again[0] != a[i] {
				t.Fatalf("raw %q re-parses to %+v", a[i].Raw, again)
			}
			if a[i].Comment {
				continue
			}
			ev := Event{Event: a[i].Event, ID: a[i].ID, Data: []byte(a[i].Data)}
			back, err := readAll(t, bytes.NewReader(AppendEvent(nil, ev)))
			if err != io.EOF || len(back) != 1 || back[0].Event != ev.Event || back[0].ID != ev.ID || back[0].Data != a[i].Data {
				t.Fatalf("AppendEvent(%+v) reads back as %+v, %v", a[i], back, err)
			}
		}
	})
}
