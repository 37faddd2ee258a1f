//go:build !unix

package admission

import "time"

func processCPU() time.Duration { return 0 }
