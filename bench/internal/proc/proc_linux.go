package proc

import "syscall"

// sysProcAttr makes the kernel kill a child when the benchmark dies, so a
// crashed or killed run leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
