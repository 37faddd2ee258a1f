package memstore

import (
	"testing"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock *clocktest.Clock) engine.Store {
		return New(clock)
	})
}

func BenchmarkGet(b *testing.B) {
	storetest.BenchmarkGet(b, New(engine.SystemClock{}))
}

func BenchmarkPut(b *testing.B) {
	storetest.BenchmarkPut(b, New(engine.SystemClock{}))
}
