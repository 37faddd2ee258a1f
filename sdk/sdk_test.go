package sdk

import "testing"

func TestABIUnreleased(t *testing.T) {
	if ABIVersionMajor != 0 {
		t.Fatalf("ABIVersionMajor = %d, want 0 until the plugin ABI is published", ABIVersionMajor)
	}
}
