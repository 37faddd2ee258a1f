package translate

import "github.com/breakwater-dev/breakwater/internal/runtime/sse"

// Event shortens sse.Event in the tests.
type Event = sse.Event
