package redact

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestKeyShapes pins the patterns of the package documentation: what is
// masked and, as important, the ordinary words and ids that are kept.
func TestKeyShapes(t *testing.T) {
	masked := []struct{ in, want string }{
		// The probe of issue 19 item 4: an upstream echoing the key.
		{`{"error":{"message":"Incorrect API key provided: sk-proj-AbC123dEf456GhI789jKl012mNo345. You can find your API key at https://platform.openai.com/account/api-keys.","code":"invalid_api_key"}}`,
			`{"error":{"message":"Incorrect API key provided: [redacted]. You can find your API key at https://platform.openai.com/account/api-keys.","code":"invalid_api_key"}}`},
		{"invalid x-api-key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789-ABCDEFGH_ijk", "invalid x-api-key [redacted]"},
		{"sk-or-v1-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "[redacted]"},
		{"API key not valid: AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q.", "API key not valid: [redacted]."},
		{"https://generativelanguage.googleapis.com/v1/models?key=AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q&alt=sse", "https://generativelanguage.googleapis.com/v1/models?key=[redacted]&alt=sse"},
		{"Authorization: Bearer eyJhbGciOi.J9.abc", "Authorization: Bearer [redacted]"},
		{`{"auth":"bearer   0123456789"}`, `{"auth":"bearer   [redacted]"}`},
		{"token BEARER\tab/cd+ef=gh=, next", "token BEARER\t[redacted], next"},
		{"gsk_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90Uv12", "[redacted]"},
		{"key xai-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90Uv12Wx34 rejected", "key [redacted] rejected"},
		{"jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
			"jwt [redacted]"},
		{"token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abc is expired.", "token [redacted] is expired."},
		{"AIzaSyA1b2C3d4E5f6G7h8", "[redacted]"},
	}
	for _, tc := range masked {
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
		if got := string(Bytes([]byte(tc.in))); got != tc.want {
			t.Errorf("Bytes(%q) = %q", tc.in, got)
		}
	}
	kept := []string{
		"The model `claude-3-5-sonnet-20241022` does not exist or you do not have access to it.",
		"Rate limit reached for gpt-4o-mini-2024-07-18 in organization org-abc123 on tokens per min (TPM): Limit 200000, Used 199000",
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`,
		"request 3f2b8c1e-9d4a-4e7b-8f6a-2c1d0e9b8a7f failed; trace 4bf92f3577b34da6a3ce929d0e0e4736ab12cd34ef56ab78cd90ef12ab34cd56",
		"chatcmpl-AbCdEf0123456789GhIjKl0123456789MnOp and msg_01XFDUDYJgAACzvnptvVoYELmsg01XFDUDYJgAAC",
		"projects/my-project-123/locations/us-central1/publishers/google/models/gemini-1.5-pro-002",
		"internationalization_and_localization_module_v2 failed",
		"lowercase k7x9q2m4p8w1z6v3n5b0c2d4f6g8h1j3l5r7t9y0 and UPPER K7X9Q2M4P8W1Z6V3N5B0C2D4F6G8H1J3L5R7",
		"ResourceExhaustedQuotaFailureForModel2024Limit GenerateContentRequestPerMinutePerProjectPerModel",
		"sk-learn is not a key, nor is task-force-ABCDEFGHIJKLMNOPQRSTUV",
		"Bearer token missing", "Bearer short",
		"用户额度不足 (quota exhausted), retry after 2h30m14s",
		"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.",
	}
	for _, s := range kept {
		if got := String(s); got != s {
			t.Errorf("String(%q) changed an ordinary text to %q", s, got)
		}
	}
}

// TestConfiguredCredentials: configured values are removed wherever they
// appear and whatever their shape; values under MinSecretLen are ignored.
func TestConfiguredCredentials(t *testing.T) {
	r := New("hunter2hunter2", "plain-lowercase-secret", "short", "", "hunter2hunter2", "lowercase-secret")
	if r.Len() != 3 {
		t.Fatalf("kept %d credentials, want 3 (dupes, empty and short dropped)", r.Len())
	}
	in := "auth hunter2hunter2 failed for plain-lowercase-secret;hunter2hunter2hunter2hunter2 short"
	want := "auth [redacted] failed for [redacted];[redacted] short"
	if got := r.String(in); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if got := (*Redactor)(nil).String(in); got != in {
		t.Fatalf("a nil Redactor knows no configured credential: %q", got)
	}
	if got := r.String("the key sk-ant-api03-abcdefghijklmnopqrstuvwx is not configured"); got != "the key [redacted] is not configured" {
		t.Fatalf("shapes still apply with configured credentials: %q", got)
	}
}

func TestHeader(t *testing.T) {
	r := New("connection-key-123")
	h := http.Header{
		"Authorization":    {"Bearer abc"},
		"X-Api-Key":        {"whatever"},
		"Set-Cookie":       {"a=b"},
		"X-Request-Id":     {"req_123"},
		"X-Debug":          {"sent connection-key-123 upstream"},
		"Www-Authenticate": {`Bearer realm="x"`},
	}
	got := r.Header(h)
	want := map[string]string{
		"Authorization": Mask, "X-Api-Key": Mask, "Set-Cookie": Mask,
		"X-Request-Id": "req_123", "X-Debug": "sent [redacted] upstream", "Www-Authenticate": `Bearer realm="x"`,
	}
	for k, v := range want {
		if got.Get(k) != v {
			t.Errorf("%s: got %q, want %q", k, got.Get(k), v)
		}
	}
	if h.Get("Authorization") != "Bearer abc" || h.Get("X-Debug") != "sent connection-key-123 upstream" {
		t.Fatal("Header modified its input")
	}
	clean := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req_1"}}
	if g := r.Header(clean); g == nil || &g["Content-Type"][0] != &clean["Content-Type"][0] {
		t.Fatal("a clean header must come back as is")
	}
	if !IsCredentialHeader("x-goog-api-key") || IsCredentialHeader("content-type") {
		t.Fatal("IsCredentialHeader")
	}
}

// TestNoAllocationWhenNothingMatches: the redaction sits on the failure
// path of every attempt; a clean text costs no allocation.
func TestNoAllocationWhenNothingMatches(t *testing.T) {
	r := New("configured-key-0001", "configured-key-0002", "configured-key-0003")
	s := strings.Repeat(`{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}} `, 8)
	b := []byte(s)
	if n := testing.AllocsPerRun(100, func() {
		if r.String(s) != s || len(r.Bytes(b)) != len(b) || String(s) != s {
			t.Fatal("changed a clean text")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per clean text, want 0", n)
	}
}

func BenchmarkRedact(b *testing.B) {
	r := New("configured-key-0001", "configured-key-0002", "configured-key-0003", "configured-key-0004", "configured-key-0005")
	clean := `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	leaky := `{"error":{"message":"Incorrect API key provided: sk-proj-AbC123dEf456GhI789jKl012mNo345 (configured-key-0003).","type":"invalid_request_error","code":"invalid_api_key"}}`
	for _, c := range []struct{ name, s string }{{"clean", clean}, {"leaky", leaky}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.s)))
			for b.Loop() {
				_ = r.String(c.s)
			}
		})
	}
}

// manySecrets returns n configured values of the shapes a gateway holds
// (provider key prefixes, some sharing their first bytes, one inside
// another).
func manySecrets(n int) []string {
	out := make([]string, 0, n)
	for i := range n {
		switch i % 4 {
		case 0:
			out = append(out, fmt.Sprintf("sk-proj-%04dabcdefghij", i))
		case 1:
			out = append(out, fmt.Sprintf("sk-ant-api03-%04d-xyz", i))
		case 2:
			out = append(out, fmt.Sprintf("bench-upstream-key-%d", i))
		default:
			out = append(out, fmt.Sprintf("bench-upstream-key-%d0", i-1)) // the one before it plus "0"
		}
	}
	return out
}

// With many configured values find looks them up by their first bytes;
// it must find exactly what one scan per value finds, wherever they sit
// (start, end, adjacent, overlapping, inside another) — and the
// redacted text must hold none of them.
func TestIndexedSecretsFindWhatScansFind(t *testing.T) {
	secrets := manySecrets(200)
	r := New(secrets...)
	if r.byHead == nil {
		t.Fatal("200 values are not indexed")
	}
	plain := &Redactor{secrets: r.secrets}
	rnd := rand.New(rand.NewPCG(1, 2))
	fillers := []string{"", " ", "x", "sk-", "bench-upstream-key-", "key=", "application/json", "é", "\n"}
	for range 2000 {
		var b strings.Builder
		for range 1 + rnd.IntN(6) {
			b.WriteString(fillers[rnd.IntN(len(fillers))])
			if rnd.IntN(2) == 0 {
				sec := secrets[rnd.IntN(len(secrets))]
				if rnd.IntN(4) == 0 {
					sec = sec[:rnd.IntN(len(sec))] // a prefix: must not match
				}
				b.WriteString(sec)
			}
		}
		text := b.String()
		got, want := r.find(text, nil), plain.find(text, nil)
		if !slices.Equal(got, want) {
			t.Fatalf("%q: indexed %v, per value %v", text, got, want)
		}
		out := r.String(text)
		for _, sec := range secrets {
			if strings.Contains(out, sec) {
				t.Fatalf("%q survives in %q", sec, out)
			}
		}
	}
}

// BenchmarkRedactManySecrets is a relayed header value and an error text
// against the keys of a gateway with 400 connections.
func BenchmarkRedactManySecrets(b *testing.B) {
	r := New(manySecrets(400)...)
	plain := &Redactor{secrets: r.secrets}
	for _, c := range []struct{ name, s string }{
		{"header", "application/json; charset=utf-8"},
		{"error", `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests","code":"rate_limit_exceeded"}}`},
	} {
		b.Run(c.name+"/indexed", func(b *testing.B) {
			for b.Loop() {
				_ = r.String(c.s)
			}
		})
		b.Run(c.name+"/per-value", func(b *testing.B) {
			for b.Loop() {
				_ = plain.String(c.s)
			}
		})
	}
}
