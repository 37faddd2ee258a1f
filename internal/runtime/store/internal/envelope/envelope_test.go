package envelope

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	tests := []struct {
		name    string
		payload []byte
		ttl     time.Duration
		stamp   string
	}{
		{"no expiry", []byte("v"), 0, NoExpiry},
		{"negative ttl is no expiry", []byte("v"), -time.Second, NoExpiry},
		{"empty payload", []byte{}, time.Second, Stamp(now.Add(time.Second))},
		{"binary payload", []byte{0, 1, 0xff}, time.Minute, Stamp(now.Add(time.Minute))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := Encode(tt.payload, Expiry(now, tt.ttl))
			if len(raw) != HeaderLen+len(tt.payload) {
				t.Fatalf("len = %d, want %d", len(raw), HeaderLen+len(tt.payload))
			}
			stamp, payload, err := Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			if stamp != tt.stamp || !bytes.Equal(payload, tt.payload) {
				t.Fatalf("got (%q, %q), want (%q, %q)", stamp, payload, tt.stamp, tt.payload)
			}
		})
	}
}

func TestDecodeMalformed(t *testing.T) {
	for _, raw := range [][]byte{nil, []byte("1"), []byte("2" + NoExpiry), []byte("1000000000000000000x")} {
		if _, _, err := Decode(raw); !errors.Is(err, ErrMalformed) {
			t.Errorf("Decode(%q) err = %v, want ErrMalformed", raw, err)
		}
	}
}

func TestAliveBoundary(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	stamp := Stamp(Expiry(now, 10*time.Second))
	tests := []struct {
		at   time.Duration
		want bool
	}{
		{0, true},
		{10*time.Second - time.Nanosecond, true},
		{10*time.Second - time.Millisecond, true},
		{10 * time.Second, false},
		{time.Hour, false},
	}
	for _, tt := range tests {
		if got := Alive(stamp, now.Add(tt.at)); got != tt.want {
			t.Errorf("Alive at +%v = %v, want %v", tt.at, got, tt.want)
		}
	}
	if !Alive(NoExpiry, now.Add(1000*time.Hour)) {
		t.Error("NoExpiry value expired")
	}
}

func TestStampClamps(t *testing.T) {
	if got := Stamp(time.Unix(-5, 0)); got != "0000000000000000001" {
		t.Errorf("pre-epoch stamp = %q", got)
	}
	if got := NowStamp(time.Unix(-5, 0)); got != NoExpiry {
		t.Errorf("pre-epoch now stamp = %q", got)
	}
	far := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := Stamp(far); got != "9223372036854775807" {
		t.Errorf("far stamp = %q", got)
	}
	if len(Stamp(time.Unix(1, 0))) != StampLen {
		t.Error("stamp not fixed width")
	}
}
