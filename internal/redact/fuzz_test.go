package redact

import (
	"strings"
	"testing"
)

// FuzzRedact checks, for any text and configured credential: the
// credential never survives, Bytes and String agree, and the output of a
// text that holds no credential and no key shape is the text itself.
func FuzzRedact(f *testing.F) {
	f.Add("Incorrect API key provided: sk-proj-AbC123dEf456GhI789jKl012mNo345.", "configured-secret")
	f.Add("Authorization: Bearer eyJhbGciOi.J9.abc", "eyJhbGciOi")
	f.Add("hunter2hunter2hunter2", "hunter2hunter2")
	f.Add(`{"error":{"message":"用户额度不足","type":"forbidden"}}`, "额度不足额度不足")
	f.Add("key=AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q&x", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q")
	f.Fuzz(func(t *testing.T, text, secret string) {
		if strings.Contains(secret, Mask) || strings.ContainsAny(secret, "[]") {
			t.Skip() // a credential spelling the mask is not a credential we can keep out
		}
		r := New(secret)
		got := r.String(text)
		if len(secret) >= MinSecretLen && strings.Contains(got, secret) {
			t.Fatalf("credential %q survives in %q", secret, got)
		}
		if b := string(r.Bytes([]byte(text))); b != got {
			t.Fatalf("Bytes %q, String %q", b, got)
		}
		if got != text && !strings.Contains(got, Mask) {
			t.Fatalf("changed %q to %q without masking", text, got)
		}
		if strings.Count(got, Mask) > strings.Count(text, Mask)+len(text)/MinSecretLen+len(text)/6 {
			t.Fatalf("more masks than credentials could fit: %q", got)
		}
	})
}
