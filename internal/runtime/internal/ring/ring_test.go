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

// Next hands out the slot of the new newest value: the zero value until
// the ring is full, then the oldest value's, which it drops.
func TestRingNextReusesTheOldestSlot(t *testing.T) {
	r := New[[]int](2)
	for i := 1; i <= 2; i++ {
		s := r.Next()
		if *s != nil {
			t.Fatalf("slot %d of a ring not yet full holds %v", i, *s)
		}
		*s = []int{i}
	}
	s := r.Next()
	if len(*s) != 1 || (*s)[0] != 1 {
		t.Fatalf("the slot after a full ring holds %v, want the oldest value [1]", *s)
	}
	(*s)[0] = 3
	if r.Len() != 2 || r.At(0)[0] != 2 || r.At(1)[0] != 3 {
		t.Fatalf("after 1, 2, 3 in a ring of 2: %v, %v (len %d), want [2], [3]", r.At(0), r.At(1), r.Len())
	}
}
