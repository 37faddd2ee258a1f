package ring

import "testing"

func TestRingDropsTheOldest(t *testing.T) {
	r := New[int](3)
	if r.Len() != 0 || r.Cap() != 3 {
		t.Fatalf("empty ring: len %d cap %d", r.Len(), r.Cap())
	}
	for i := 1; i <= 5; i++ {
		r.Push(i)
	}
	if r.Len() != 3 || r.At(0) != 3 || r.At(1) != 4 || r.At(2) != 5 {
		t.Fatalf("after 1..5 in a ring of 3: %d, %d, %d (len %d), want 3, 4, 5", r.At(0), r.At(1), r.At(2), r.Len())
	}
	if New[int](0).Cap() != 1 {
		t.Fatal("a ring has a capacity of at least 1")
	}
}
