// Package ring is a fixed-capacity ring buffer that drops its oldest
// element when full: the storage of the console's time series and request
// log.
package ring

// Ring holds the last Cap() values pushed, oldest first. The zero value has
// no capacity; build one with New. It is not goroutine-safe.
type Ring[T any] struct {
	buf   []T
	start int
	n     int
}

// New returns an empty Ring of capacity n (at least 1).
func New[T any](n int) *Ring[T] {
	return &Ring[T]{buf: make([]T, max(n, 1))}
}

// Push appends v, dropping the oldest value when the ring is full.
func (r *Ring[T]) Push(v T) {
	if r.n == len(r.buf) {
		r.buf[r.start] = v
		r.start = (r.start + 1) % len(r.buf)
		return
	}
	r.buf[(r.start+r.n)%len(r.buf)] = v
	r.n++
}

// Len is the number of values held.
func (r *Ring[T]) Len() int { return r.n }

// Cap is the capacity.
func (r *Ring[T]) Cap() int { return len(r.buf) }

// At returns the i-th value held, 0 being the oldest; i must be in
// [0, Len()).
func (r *Ring[T]) At(i int) T { return r.buf[(r.start+i)%len(r.buf)] }
