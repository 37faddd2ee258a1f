package wire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestSpliceModelIsRewriteModelWithoutACopy: the spliced body is the
// rewritten body byte for byte, and its pieces alias the client's body
// (nothing of it is copied); Detached is a copy that does not.
func TestSpliceModelIsRewriteModelWithoutACopy(t *testing.T) {
	body := []byte(`{"messages":[{"role":"user","content":"model"}], "model" : "prov/gpt-x" ,"stream":true}`)
	r, err := Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"gpt-x", `gpt-"x"`, "prov/gpt-x", "été"} {
		s := r.SpliceModel(body, model)
		want := r.RewriteModel(body, model)
		if got := s.AppendTo(nil); !bytes.Equal(got, want) || s.Len() != len(want) {
			t.Errorf("%q: spliced %q (len %d), rewritten %q", model, got, s.Len(), want)
		}
		p := s.Pieces()
		if &p[0][0] != &body[0] {
			t.Errorf("%q: the head is a copy", model)
		}
		if len(p[2]) > 0 && &p[2][len(p[2])-1] != &body[len(body)-1] {
			t.Errorf("%q: the tail is a copy", model)
		}
		d := s.Detached()
		if !bytes.Equal(d, want) || &d[0] == &body[0] {
			t.Errorf("%q: Detached %q aliases the body or differs", model, d)
		}
	}
	if b, ok := r.SpliceModel(body, "prov/gpt-x").Single(); !ok || &b[0] != &body[0] || len(b) != len(body) {
		t.Error("an unchanged model is the body itself, in one piece")
	}
	if _, ok := r.SpliceModel(body, "other").Single(); ok {
		t.Error("a replaced model is three pieces")
	}
}

// TestOwnedIsItsOwnDetachedCopy: a translation's output is handed on
// without another copy.
func TestOwnedIsItsOwnDetachedCopy(t *testing.T) {
	out := []byte(`{"model":"claude-x"}`)
	s := Owned(out)
	if d := s.Detached(); &d[0] != &out[0] || s.Len() != len(out) {
		t.Fatal("Detached copied an owned body")
	}
	if b, ok := s.Single(); !ok || &b[0] != &out[0] {
		t.Fatal("an owned body is one piece")
	}
}

// TestQuoteModelIsJSONMarshal: the spliced model value is what
// json.Marshal writes, for plain names (quoted in one allocation) and for
// names it escapes.
func TestQuoteModelIsJSONMarshal(t *testing.T) {
	for _, model := range []string{"gpt-4o", "prov/claude-3-5-sonnet@20241022", "a b~!#$%'()*+,-./:;=?[]^_`{|}", "",
		`gpt-"x"`, `back\slash`, "<b>&", "été", "tab\there", "line\u2028sep", "\xff"} {
		want, _ := json.Marshal(model)
		if got := quoteModel(model); !bytes.Equal(got, want) {
			t.Errorf("%q: quoted %s, want %s", model, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = quoteModel("prov/gpt-4o") }); n != 1 {
		t.Errorf("%v allocations for a plain name, want 1", n)
	}
}
