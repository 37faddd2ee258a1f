package relay

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/engine/watchdog"
	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

const benchEvents = 1000

// benchBody is a realistic stream of n content events plus its ending.
func benchBody(f wire.Format, n int) []byte {
	var b strings.Builder
	switch f {
	case wire.FormatMessages:
		b.WriteString(anStart + anBlockText + anPing)
		for range n {
			b.WriteString(anText)
		}
		b.WriteString(anBlockStop + anMsgDelta + anMsgStop)
	default:
		b.WriteString(oaRole)
		for range n {
			b.WriteString(oaHello)
		}
		b.WriteString(oaFinish + oaUsage + oaDone)
	}
	return []byte(b.String())
}

// BenchmarkRelayStream measures the whole relay per event: the reader
// goroutine (sse.Reader.Next), the hand-over, classification, the
// watchdogs, the write and the flush of every event.
func BenchmarkRelayStream(b *testing.B) {
	for _, f := range []wire.Format{wire.FormatChat, wire.FormatMessages} {
		b.Run(f.String(), func(b *testing.B) {
			body := benchBody(f, benchEvents)
			cfg := Config{ClientFormat: f, Events: readerOf(f),
				Throughput: watchdog.ThroughputConfig{Enabled: true}}
			w := bufio.NewWriterSize(io.Discard, 4096)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				s, fl := Prime(context.Background(), cfg, Attempt{Body: io.NopCloser(bytes.NewReader(body))})
				if fl != nil {
					b.Fatal(fl)
				}
				if r := s.Run(w); r.End != EndComplete {
					b.Fatal(r.End)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchEvents), "ns/event")
		})
	}
}

// BenchmarkEventPath measures the synchronous part of each event without
// the goroutine hand-over: Reader.Next, the event reader, write and flush.
func BenchmarkEventPath(b *testing.B) {
	for _, f := range []wire.Format{wire.FormatChat, wire.FormatMessages} {
		b.Run(f.String(), func(b *testing.B) {
			body := benchBody(f, benchEvents)
			read := readerOf(f)
			w := bufio.NewWriterSize(io.Discard, 4096)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				rd := sse.NewReader(bytes.NewReader(body))
				for {
					ev, err := rd.Next()
					if err != nil {
						break
					}
					_ = read(ev)
					w.Write(ev.Raw)
					w.Flush()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchEvents), "ns/event")
		})
	}
}
