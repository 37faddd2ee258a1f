//go:build !linux

package proc

import "syscall"

// sysProcAttr returns nil: only Linux can tie a child's life to ours.
func sysProcAttr() *syscall.SysProcAttr { return nil }
