package relay

import (
	"io"

	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
)

// pumpDepth is how many events the reader goroutine may read ahead.
const pumpDepth = 8

// item is one result of sse.Reader.Next. Its event's slices live in buf,
// which the consumer hands back with recycle.
type item struct {
	ev  sse.Event
	err error
	buf []byte
}

// pump is the reader goroutine of one attempt. Since an event from
// sse.Reader aliases the reader's buffer, the pump copies each event into
// a recycled buffer before handing it over, so it can read ahead up to
// pumpDepth events without a rendezvous per event. It exits after
// delivering an error or when stop is closed; done is closed on exit.
type pump struct {
	events chan item
	free   chan []byte
	stop   chan struct{}
	done   chan struct{}
}

func startPump(body io.Reader) *pump {
	p := &pump{
		events: make(chan item, pumpDepth),
		free:   make(chan []byte, pumpDepth+2),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go p.run(sse.NewReader(body))
	return p
}

func (p *pump) run(r *sse.Reader) {
	defer close(p.done)
	for {
		ev, err := r.Next()
		it := item{err: err}
		if err == nil {
			it.ev, it.buf = p.own(ev)
		}
		select {
		case p.events <- it:
		case <-p.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// own copies ev's bytes into a recycled buffer.
func (p *pump) own(ev sse.Event) (sse.Event, []byte) {
	var buf []byte
	select {
	case buf = <-p.free:
	default:
	}
	n := len(ev.Raw)
	buf = append(buf[:0], ev.Raw...)
	buf = append(buf, ev.Data...)
	ev.Raw = buf[:n:n]
	if ev.Data != nil {
		ev.Data = buf[n:len(buf):len(buf)]
	}
	return ev, buf
}

// recycle hands an item's buffer back once its event is no longer used.
func (p *pump) recycle(it item) {
	if it.buf == nil {
		return
	}
	select {
	case p.free <- it.buf:
	default:
	}
}

// close stops the goroutine and waits for it. The caller must first make a
// pending Read return (cancel the request, close the body).
func (p *pump) close() {
	close(p.stop)
	<-p.done
}
