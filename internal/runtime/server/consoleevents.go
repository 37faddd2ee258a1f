package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Live-update limits of the console's event stream.
const (
	// ticketTTL is how long a stream ticket may wait to be used.
	ticketTTL = 30 * time.Second
	// maxTickets bounds the unused tickets kept.
	maxTickets = 256
	// maxConsoleStreams bounds the event streams open at once.
	maxConsoleStreams = 32
	// statePoll is how often a stream looks for a changed state, new
	// requests and new overview samples; it sends only what changed.
	statePoll = 500 * time.Millisecond
	// keepAlive is the longest a stream stays silent: a failed write is
	// how a client that left is noticed (within about two of them).
	keepAlive = 2 * time.Second
)

// ticketBook holds the single-use tickets that open an event stream. Only
// their SHA-256 is kept. It is goroutine-safe.
type ticketBook struct {
	mu sync.Mutex
	m  map[[32]byte]time.Time
}

func newTicketBook() *ticketBook { return &ticketBook{m: map[[32]byte]time.Time{}} }

// issue returns a new ticket valid until the returned time.
func (b *ticketBook) issue(now time.Time) (string, time.Time, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", time.Time{}, fmt.Errorf("console ticket: %w", err)
	}
	tok := base64.RawURLEncoding.EncodeToString(raw[:])
	exp := now.Add(ticketTTL)
	b.mu.Lock()
	defer b.mu.Unlock()
	for h, e := range b.m {
		if !now.Before(e) {
			delete(b.m, h)
		}
	}
	if len(b.m) >= maxTickets {
		return "", time.Time{}, errTooManyTickets
	}
	b.m[sha256.Sum256([]byte(tok))] = exp
	return tok, exp, nil
}

var errTooManyTickets = fmt.Errorf("console ticket: %d unused tickets are pending", maxTickets)

// redeem reports whether tok is a valid ticket and uses it up.
func (b *ticketBook) redeem(tok string, now time.Time) bool {
	if tok == "" {
		return false
	}
	h := sha256.Sum256([]byte(tok))
	b.mu.Lock()
	defer b.mu.Unlock()
	exp, ok := b.m[h]
	delete(b.m, h)
	return ok && now.Before(exp)
}

// streamCount counts the open event streams.
type streamCount struct{ n atomic.Int64 }

// enter takes a stream slot; false when maxConsoleStreams are open.
func (c *streamCount) enter() bool {
	if c.n.Add(1) > maxConsoleStreams {
		c.n.Add(-1)
		return false
	}
	return true
}

func (c *streamCount) leave()        { c.n.Add(-1) }
func (c *streamCount) active() int64 { return c.n.Load() }

// handleConsoleTicket serves POST /api/console/ticket (admin token): a
// single-use ticket, valid 30 s, that opens one event stream.
func (s *Server) handleConsoleTicket(c *fiber.Ctx) error {
	tok, exp, err := s.console.tickets.issue(s.clock.Now())
	if err != nil {
		return s.adminError(c, &wire.APIError{Status: 429, Type: "rate_limit_error", Code: "too_many_tickets", Message: err.Error()})
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(fiber.Map{"ticket": tok, "expires_at": exp})
}

// handleConsoleEvents serves GET /api/console/events?ticket=T: the
// console's live updates as server-sent events. Events: "state" (the
// live state, when it changed), "samples" (new overview samples),
// "requests" (new request-log records); a comment line keeps the
// connection alive. The stream ends when the client leaves (a write
// fails) or the server shuts down.
func (s *Server) handleConsoleEvents(c *fiber.Ctx) error {
	if !s.console.tickets.redeem(c.Query("ticket"), s.clock.Now()) {
		return s.writeError(c, &wire.APIError{Status: 401, Type: "authentication_error", Code: "unauthorized",
			Message: "the event stream needs a fresh ticket from POST /api/console/ticket"}, wire.FormatChat)
	}
	if !s.console.streams.enter() {
		return s.writeError(c, &wire.APIError{Status: 429, Type: "rate_limit_error", Code: "too_many_streams",
			Message: fmt.Sprintf("%d console event streams are open already", maxConsoleStreams)}, wire.FormatChat)
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("X-Accel-Buffering", "no")
	ctx, conn := s.baseCtx, c.Context().Conn()
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer s.console.streams.leave()
		s.streamTo(w, conn, func(w *bufio.Writer) { s.streamConsole(ctx, w) })
	})
	return nil
}

// streamConsole writes the event stream until ctx ends or a write fails.
func (s *Server) streamConsole(ctx context.Context, w *bufio.Writer) {
	t := time.NewTicker(statePoll)
	defer t.Stop()
	var lastState []byte
	lastSeq := s.console.requests.Last()
	lastSample := time.Time{} // the first push carries the last 15 minutes
	lastWrite := time.Time{}
	if _, err := fmt.Fprintf(w, "retry: 3000\n\n"); err != nil {
		return
	}
	for {
		sent, err := s.pushConsole(w, &lastState, &lastSeq, &lastSample)
		if err != nil {
			return
		}
		now := time.Now()
		if sent {
			lastWrite = now
		} else if now.Sub(lastWrite) >= keepAlive {
			if _, err := w.WriteString(": keep-alive\n\n"); err != nil || w.Flush() != nil {
				return
			}
			lastWrite = now
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pushConsole writes what changed since the last push and reports whether
// it wrote anything.
func (s *Server) pushConsole(w *bufio.Writer, lastState *[]byte, lastSeq *uint64, lastSample *time.Time) (bool, error) {
	sent := false
	st := s.consoleSnapshot()
	now := st.Now
	st.Now = time.Time{}
	b, err := json.Marshal(st)
	if err != nil {
		return false, err
	}
	if !bytes.Equal(b, *lastState) {
		*lastState = b
		st.Now = now
		if err := writeEvent(w, "state", st); err != nil {
			return false, err
		}
		sent = true
	}
	if recs, last := s.console.requests.Since(*lastSeq); len(recs) > 0 {
		*lastSeq = last
		if err := writeEvent(w, "requests", recs); err != nil {
			return false, err
		}
		sent = true
	}
	if samples := s.console.series.Samples(*lastSample); len(samples) > 0 {
		*lastSample = samples[len(samples)-1].At
		if err := writeEvent(w, "samples", samples); err != nil {
			return false, err
		}
		sent = true
	}
	if sent {
		return true, w.Flush()
	}
	return false, nil
}

// writeEvent writes one server-sent event with v as its JSON data.
func writeEvent(w *bufio.Writer, event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "event: %s\ndata: ", event); err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	_, err = w.WriteString("\n\n")
	return err
}
