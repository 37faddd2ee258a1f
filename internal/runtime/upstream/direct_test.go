package upstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// routeOf is the route of a client path of call: "Do via proxy" goes
// through a forward proxy started for the test, the others are direct.
func routeOf(t *testing.T, path string) Route {
	t.Helper()
	if path != "Do via proxy" {
		return Route{}
	}
	return Route{ProxyURL: forwardProxy(t)}
}

// forwardProxy starts an HTTP forward proxy that relays each answer as it
// arrives (its headers at once, each body write flushed) and passes
// compressed bodies through untouched; it returns its URL.
func forwardProxy(t *testing.T) string {
	t.Helper()
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.Out.Host = pr.In.Host },
		FlushInterval: -1,
		Transport:     &http.Transport{DisableCompression: true},
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rp.ServeHTTP(flushingWriter{w}, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// flushingWriter sends an answer's headers as soon as they are written.
type flushingWriter struct{ http.ResponseWriter }

func (w flushingWriter) WriteHeader(code int) {
	w.ResponseWriter.WriteHeader(code)
	w.ResponseWriter.(http.Flusher).Flush()
}

func (w flushingWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// countingServer is an upstream that counts the connections it accepted.
func countingServer(t *testing.T, h http.Handler, secure bool) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	if secure {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &conns
}

// stream opens a streaming call on a direct route of p.
func stream(t *testing.T, p *Pool, ctx context.Context, url string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"stream":true}`))
	resp, err := p.Do(req, Route{}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// eventStream answers n events, flushing each.
func eventStream(n int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for range n {
			_, _ = io.WriteString(w, "data: {}\n\n")
			w.(http.Flusher).Flush()
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}
}

// A stream read to its end gives its connection back: the next call uses
// it (one connection for three calls), even when the caller cancels its
// context once the body is read, as the proxy does; over TLS as well.
func TestDirectStreamReadToItsEndIsReused(t *testing.T) {
	for _, secure := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[secure], func(t *testing.T) {
			var srv *httptest.Server
			var conns *atomic.Int32
			p := NewPool(Timeouts{})
			defer p.Close()
			if secure {
				srv, conns = countingServer(t, eventStream(5), true)
				roots := x509.NewCertPool()
				roots.AddCert(srv.Certificate())
				p.tls = &tls.Config{RootCAs: roots}
			} else {
				srv, conns = countingServer(t, eventStream(5), false)
			}
			for range 3 {
				ctx, cancel := context.WithCancel(context.Background())
				resp := stream(t, p, ctx, srv.URL)
				b, err := io.ReadAll(resp.Body)
				cancel()
				resp.Body.Close()
				if err != nil || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
					t.Fatalf("body %q, err %v", b, err)
				}
			}
			if n := conns.Load(); n != 1 {
				t.Fatalf("%d connections for three calls read to their end, want 1", n)
			}
		})
	}
}

// A stream cut mid-body (closed before its end, or its context cancelled)
// closes its connection: the next call gets a new one and a whole answer.
func TestDirectStreamCutIsNotReused(t *testing.T) {
	srv, conns := countingServer(t, eventStream(200), false)
	p := NewPool(Timeouts{})
	defer p.Close()
	cut := map[string]func(resp *http.Response, cancel context.CancelFunc){
		"closed":    func(resp *http.Response, _ context.CancelFunc) { resp.Body.Close() },
		"cancelled": func(resp *http.Response, cancel context.CancelFunc) { cancel(); resp.Body.Close() },
	}
	for name, end := range cut {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp := stream(t, p, ctx, srv.URL)
			before := conns.Load()
			buf := make([]byte, 64)
			if _, err := io.ReadFull(resp.Body, buf); err != nil {
				t.Fatal(err)
			}
			end(resp, cancel)
			resp = stream(t, p, context.Background(), srv.URL)
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || strings.Count(string(b), "data: {}") != 200 {
				t.Fatalf("the next call read %d events, err %v", strings.Count(string(b), "data: {}"), err)
			}
			if n := conns.Load() - before; n != 1 {
				t.Fatalf("the call after a cut one made %d new connections, want 1", n)
			}
		})
	}
}

// A pooled connection the upstream closed while it was idle is never
// used: the call goes out on a new connection and succeeds.
func TestDirectIdleConnectionClosedByTheUpstream(t *testing.T) {
	srv, conns := countingServer(t, eventStream(2), false)
	p := NewPool(Timeouts{})
	defer p.Close()
	for i := range 2 {
		resp := stream(t, p, context.Background(), srv.URL)
		if _, err := io.ReadAll(resp.Body); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		resp.Body.Close()
		srv.CloseClientConnections()
		time.Sleep(20 * time.Millisecond) // the FIN reaches the client's socket
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// The caller's context ending while a body read is blocked on a silent
// upstream makes the read return at once with the context's error, not a
// timer's.
func TestDirectCancelDuringABlockedRead(t *testing.T) {
	srv := httptest.NewServer(slowAnswer(0, -1, 0))
	defer srv.Close()
	p := NewPool(Timeouts{Idle: time.Minute})
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	resp := stream(t, p, ctx, srv.URL)
	defer resp.Body.Close()
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := resp.Body.Read(make([]byte, 64))
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("the read returned %v after the cancel", el-200*time.Millisecond)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, cut := AsTimeout(err); cut {
		t.Fatalf("a cancel reported as a timer's cut: %v", err)
	}
	// Cancelled while waiting for the headers: the call fails with the
	// context's error as well.
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server sees the client leave
		slowAnswer(5*time.Second, 1, 0)(w, r)
	}))
	defer srv2.Close()
	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel2)
	req, _ := http.NewRequestWithContext(ctx2, http.MethodPost, srv2.URL, strings.NewReader(`{}`))
	start = time.Now()
	_, err = p.Do(req, Route{}, Limits{})
	if el := time.Since(start); el > 2*time.Second || !errors.Is(err, context.Canceled) {
		t.Fatalf("after %v: err = %v, want context.Canceled", el, err)
	}
}

// A read of a silent stream blocked in the caller's goroutine is cut by
// the idle timer once it has waited the idle timeout, counted from the
// start of the read (not earlier, even when the body flowed first and
// the caller waited between reads).
func TestDirectIdleCutsASilentStream(t *testing.T) {
	srv := httptest.NewServer(flowThenSilence(3, 50*time.Millisecond))
	defer srv.Close()
	p := NewPool(Timeouts{Idle: testIdle})
	defer p.Close()
	resp := stream(t, p, context.Background(), srv.URL)
	defer resp.Body.Close()
	buf := make([]byte, 1024)
	got := 0
	for got < 3*len("piece;") {
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatalf("after %d bytes: %v", got, err)
		}
		got += n
	}
	time.Sleep(testIdle / 2) // the caller is busy: not the upstream's silence
	start := time.Now()
	_, err := resp.Body.Read(buf)
	wantTimeout(t, err, TimerIdle)
	if el := time.Since(start); el < testIdle || el > testIdle+2*time.Second {
		t.Fatalf("cut after %v, want about %v", el, testIdle)
	}
}

// DoWhile runs meanwhile once the request has been sent and before its
// answer is read: this upstream answers only after meanwhile
// ran, so a call that read first would time out. A request that cannot be
// sent runs nothing.
func TestDoWhileRunsMeanwhileBetweenSendAndAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got, release := make(chan struct{}), make(chan struct{})
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		req, err := http.ReadRequest(bufio.NewReader(conn))
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		close(got)
		<-release
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n6\r\ndata: \r\n0\r\n\r\n")
	}()
	p := NewPool(Timeouts{FirstByte: 5 * time.Second})
	defer p.Close()
	req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/v1/chat", strings.NewReader(`{"stream":true}`))
	runs := 0
	resp, err := p.DoWhile(req, Route{}, Limits{}, func() {
		runs++
		select {
		case <-got: // the request was sent before meanwhile ran
		case <-time.After(5 * time.Second):
			t.Error("meanwhile ran before the request was sent")
		}
		close(release)
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "data: " || runs != 1 {
		t.Fatalf("body %q, error %v, meanwhile ran %d times", b, err, runs)
	}

	never := func() { t.Error("meanwhile ran for a request that was not sent") }
	bad, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/v1/chat", strings.NewReader("{}"))
	bad.Header.Set("X-Bad", "a\nb")
	if _, err := p.DoWhile(bad, Route{}, Limits{}, never); !IsLocal(err) {
		t.Fatalf("invalid header: %v, want a local error", err)
	}
	ln.Close()
	fresh := NewPool(Timeouts{}) // no pooled connection to the closed port
	defer fresh.Close()
	refused, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/v1/chat", strings.NewReader("{}"))
	if _, err := fresh.DoWhile(refused, Route{}, Limits{}, never); err == nil {
		t.Fatal("a call to a closed port succeeded")
	}
}

// A route's direct client is one, however many calls look it up at once.
func TestDirectForConcurrentLookups(t *testing.T) {
	p := NewPool(Timeouts{})
	defer p.Close()
	r := Route{LocalAddress: "127.0.0.1"}
	clients := make(chan *directClient, 16)
	for range 16 {
		go func() {
			c, err := p.directFor(r)
			if err != nil {
				t.Error(err)
			}
			clients <- c
		}()
	}
	first := <-clients
	for range 15 {
		if c := <-clients; c != first {
			t.Fatal("two clients for one route")
		}
	}
	if c, _ := p.directFor(Route{}); c == first {
		t.Fatal("another route shares the client")
	}
}
