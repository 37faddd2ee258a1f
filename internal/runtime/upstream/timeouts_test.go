package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// The client's timers on real sockets, scaled down: first byte 400 ms,
// idle 300 ms (docs/timeouts.md has the real defaults).
const (
	testFirstByte = 400 * time.Millisecond
	testIdle      = 300 * time.Millisecond
)

// slowAnswer answers after headersAfter, then writes n pieces of body,
// one every every, flushing each; with n < 0 it stays silent after the
// headers until the client leaves.
func slowAnswer(headersAfter time.Duration, n int, every time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		wait := func(d time.Duration) bool {
			select {
			case <-time.After(d):
				return true
			case <-r.Context().Done():
				return false
			}
		}
		if !wait(headersAfter) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		if n < 0 {
			<-r.Context().Done()
			return
		}
		for i := range n {
			if i > 0 && !wait(every) {
				return
			}
			_, _ = io.WriteString(w, "piece;")
			w.(http.Flusher).Flush()
		}
	}
}

// call runs one call through a client path of p: "Do" (a direct route,
// reading the whole body), "Do via proxy" (the same through a forward
// proxy, net/http's client), "DoBuffered" or "DoBuffered kept".
func call(t *testing.T, p *Pool, path, url string, lim Limits) (string, error) {
	t.Helper()
	if strings.HasPrefix(path, "DoBuffered") {
		b, err := p.DoBuffered(bufferedTarget(path, url, nil), wire.Owned([]byte(`{}`)), Route{}, lim.FirstByte)
		if err != nil {
			return "", err
		}
		return string(b.Body), nil
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	resp, err := p.Do(req, routeOf(t, path), lim)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// paths are the client paths call runs: Do on a direct route, Do through
// a proxy, DoBuffered to a Target literal and to a Target kept
// (NewTarget).
var paths = []string{"Do", "Do via proxy", "DoBuffered", "DoBuffered kept"}

// bufferedTarget is the Target of a POST to url with h for the client
// path "DoBuffered" (a literal) or "DoBuffered kept" (NewTarget).
func bufferedTarget(path, url string, h http.Header) Target {
	if path == "DoBuffered kept" {
		return NewTarget(http.MethodPost, url, h)
	}
	return Target{Method: http.MethodPost, URL: url, Header: h}
}

// wantTimeout checks that err is the client's TimeoutError of timer.
func wantTimeout(t *testing.T, err error, timer Timer) {
	t.Helper()
	te, ok := AsTimeout(err)
	if !ok || te.Timer != timer {
		t.Fatalf("err = %v, want the %s timer's TimeoutError", err, timer)
	}
}

// A slow answer that keeps arriving is never cut: its first byte comes
// within the first-byte limit and its body then takes three times that
// limit, in pieces closer together than the idle timeout. The old
// synchronous client bounded the whole answer by the first-byte deadline.
func TestSlowFlowingAnswerIsNeverCut(t *testing.T) {
	srv := httptest.NewServer(slowAnswer(200*time.Millisecond, 13, 100*time.Millisecond)) // body ≈ 1.2 s
	defer srv.Close()
	p := NewPool(Timeouts{FirstByte: testFirstByte, Idle: testIdle})
	defer p.Close()
	for _, path := range paths {
		t.Run(path, func(t *testing.T) {
			body, err := call(t, p, path, srv.URL, Limits{})
			if err != nil || body != strings.Repeat("piece;", 13) {
				t.Fatalf("body %q, err %v", body, err)
			}
		})
	}
}

// A silent upstream is cut by the timer of the phase it is silent in, on
// both clients, never before its limit: no first byte within the call's
// limit (Limits lower the client's default of a minute) is the first-byte
// timer; an answer that started and then went silent longer than the idle
// timeout is the idle timer, long before the first-byte limit, counted
// from its last piece when it flowed for a while first (the synchronous
// client sets the idle deadline once per answer and moves it only when it
// passes: the cut must not come earlier).
func TestTimersCutASilentUpstream(t *testing.T) {
	for _, tc := range []struct {
		name     string
		upstream http.HandlerFunc
		lim      Limits
		want     Timer
		after    time.Duration
	}{
		{"first byte", slowAnswer(5*time.Second, 1, 0), Limits{FirstByte: testFirstByte}, TimerFirstByte, testFirstByte},
		{"idle", slowAnswer(0, -1, 0), Limits{}, TimerIdle, testIdle},
		{"idle after flowing", flowThenSilence(5, 100*time.Millisecond), Limits{}, TimerIdle, 4*100*time.Millisecond + testIdle},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.upstream)
			defer srv.Close()
			p := NewPool(Timeouts{FirstByte: time.Minute, Idle: testIdle})
			defer p.Close()
			for _, path := range paths {
				t.Run(path, func(t *testing.T) {
					start := time.Now()
					_, err := call(t, p, path, srv.URL, tc.lim)
					wantTimeout(t, err, tc.want)
					if el := time.Since(start); el < tc.after || el > tc.after+3*time.Second {
						t.Fatalf("cut after %v, want about %v", el, tc.after)
					}
				})
			}
		})
	}
}

// The hard deadline ends a call whatever its progress (Do, on a direct
// route and through a proxy), not before.
func TestDeadlineEndsAFlowingCall(t *testing.T) {
	srv := httptest.NewServer(slowAnswer(0, 100, 50*time.Millisecond)) // 5 s of steady body
	defer srv.Close()
	p := NewPool(Timeouts{Idle: testIdle})
	defer p.Close()
	for _, path := range paths[:2] {
		t.Run(path, func(t *testing.T) {
			start := time.Now()
			_, err := call(t, p, path, srv.URL, Limits{Deadline: 500 * time.Millisecond})
			wantTimeout(t, err, TimerDeadline)
			if el := time.Since(start); el < 500*time.Millisecond || el > 3*time.Second {
				t.Fatalf("cut after %v", el)
			}
		})
	}
}

// Over TLS the synchronous clients' dialers (DoBuffered's, and Do's on a
// direct route) set up TLS themselves, so their connections see only HTTP
// bytes (a TLS 1.3 session ticket a server sends
// after the handshake must not start the answer): a first byte slower
// than the idle timeout is not cut, on a fresh connection or a pooled one.
func TestSynchronousClientOverTLS(t *testing.T) {
	srv := httptest.NewTLSServer(slowAnswer(2*testIdle, 3, 100*time.Millisecond))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	p := NewPool(Timeouts{FirstByte: 5 * time.Second, Idle: testIdle})
	p.tls = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}
	defer p.Close()
	q := NewPool(Timeouts{Connect: time.Second})
	defer q.Close()
	for _, path := range []string{"Do", "DoBuffered", "DoBuffered kept"} {
		t.Run(path, func(t *testing.T) {
			for range 2 { // a fresh connection, then a pooled one
				body, err := call(t, p, path, srv.URL, Limits{})
				if err != nil || body != strings.Repeat("piece;", 3) {
					t.Fatalf("body %q, err %v", body, err)
				}
			}
			// An untrusted certificate fails the dial, as a transport error.
			if _, err := call(t, q, path, srv.URL, Limits{}); err == nil || !strings.Contains(err.Error(), "tls") {
				t.Fatalf("untrusted certificate: %v", err)
			}
		})
	}
}

// flowThenSilence writes n pieces of body, one every every, then stays
// silent until the client leaves.
func flowThenSilence(n int, every time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		slowAnswer(0, n, every)(w, r)
		<-r.Context().Done()
	}
}
