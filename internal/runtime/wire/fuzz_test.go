package wire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzParse checks the request scanner against encoding/json: it refuses
// a body as not valid JSON exactly when json.Valid does (with the vector
// plainRun and the portable one) (and before any
// complaint about a field); whatever it accepts, a Go reader
// (case-insensitive struct fields, last duplicate wins) reads the same model, stream and background; a refusal is a
// FieldError; RewriteModel and WithoutBackground keep the body valid JSON
// and change only their field.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"model":"a/b","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"content":"{\"model\":\"x\"}"}],"stream":true,"model":"m","tools":[{"a":[1,2,{"b":"]"}]}]}`,
		`{"model":"a\u002fb","messages":[1]}`,
		`{"model":"m","messages":[1],"stream":true,"str\u0065am":false}`,
		`{"model":"allowed","mod\u0065l":"other","messages":[1]}`,
		`{"model":"m","Stream":true,"messages":[1]}`,
		`{"model":"m","ſtream":true,"messages":[1]}`,
		`{"model":"m","input":"x","background":true}`,
		`{"model":"caf\u00e9","messages":[1],"model":"x"}`,
		`{"model":"a\ud800","messages":[1]}`,
		`{"model":"` + "\xff" + `","messages":[1]}`,
		` { "model" : "m" , "messages" : [ 1 ] } `,
		`{"model":`, `[]`, `null`, `{}`,
		`{"model":3,"messages":[`, `{"model":"m","messages":[1]}x`, `{"model":"m","messages":[-01]}`,
		`{"model":"m","messages":["\x"]}`, `{"model":"m","messages":[1.5e+3,-0.0,"\u00e9"]} `,
		`{"model":"m",,"messages":[1]}`, `{"model":"m","messages":[1,]}`, `{"model":"m","messages":[{"a":tru}]}`,
		`{"model":"m","messages":["` + strings.Repeat("plain words ", 30) + `\n\"` + strings.Repeat("x", 200) + "\x01" + `"]}`,
		`{"model":"m","messages":["` + strings.Repeat("é plain ", 300) + `"],"stream":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		isJSON := json.Valid(body)
		if Valid(body) != isJSON {
			t.Fatalf("the scanner's validity %v, json.Valid %v", !isJSON, isJSON)
		}
		if vectorStops {
			vectorStops = false
			portable := Valid(body)
			vectorStops = true
			if portable != isJSON {
				t.Fatalf("the portable scanner's validity %v, json.Valid %v", portable, isJSON)
			}
		}
		for f := range NumFormats {
			parse := func(b []byte) (Request, error) { return ParseFor(f, b) }
			r, err := parse(body)
			if err != nil {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field == "" {
					t.Fatalf("refusal is not a FieldError: %v", err)
				}
				if notValid := *fe == *notJSON(); notValid == isJSON {
					t.Fatalf("refused %q with %v; json.Valid says %v", body, err, isJSON)
				}
				continue
			}
			var doc struct {
				Model      string `json:"model"`
				Stream     bool   `json:"stream"`
				Background bool   `json:"background"`
			}
			if err := json.Unmarshal(body, &doc); err != nil {
				t.Fatalf("accepted a body encoding/json refuses: %v", err)
			}
			if doc.Model != r.Model || doc.Stream != r.Stream || doc.Background != r.Background {
				t.Fatalf("scanner read %q/%v/%v, encoding/json %q/%v/%v", r.Model, r.Stream, r.Background, doc.Model, doc.Stream, doc.Background)
			}
			out := r.RewriteModel(body, "rewritten/model")
			doc.Model = ""
			if err := json.Unmarshal(out, &doc); err != nil || doc.Model != "rewritten/model" || doc.Stream != r.Stream {
				t.Fatalf("rewrite broke the body: %v %q -> %s", err, doc.Model, out)
			}
			r2, err := parse(out)
			if err != nil || r2.Model != "rewritten/model" {
				t.Fatalf("rewritten body does not parse back: %v", err)
			}
			bg := r.WithoutBackground(body)
			doc.Background = false
			if err := json.Unmarshal(bg, &doc); err != nil || doc.Background {
				t.Fatalf("WithoutBackground: %v, background %v", err, doc.Background)
			}
		}
	})
}
