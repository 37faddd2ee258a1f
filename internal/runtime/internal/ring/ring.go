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
func (r *Ring[T]) Push(v T) { *r.Next() = v }

// Next makes room for one more value, dropping the oldest when the ring
// is full, and returns the new newest value's slot to be filled in place:
// it still holds the dropped value (the zero value while the ring was not
// full), whose parts the caller may reuse.
func (r *Ring[T]) Next() *T {
	if r.n == len(r.buf) {
		v := &r.buf[r.start]
		r.start++
		if r.start == len(r.buf) {
			r.start = 0
		}
		return v
	}
	i := r.start + r.n
	if i >= len(r.buf) {
		i -= len(r.buf)
	}
	r.n++
	return &r.buf[i]
}

// Len is the number of values held.
func (r *Ring[T]) Len() int { return r.n }

// Cap is the capacity.
func (r *Ring[T]) Cap() int { return len(r.buf) }

// At returns the i-th value held, 0 being the oldest; i must be in
// [0, Len()).
func (r *Ring[T]) At(i int) T { return r.buf[(r.start+i)%len(r.buf)] }
