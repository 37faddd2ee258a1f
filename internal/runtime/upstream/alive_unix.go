//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package upstream

import (
	"net"
	"syscall"
)

// alive reports whether an idle pooled socket is still open: it peeks at
// the socket without waiting. An idle connection has nothing to read, so
// an end of stream (the upstream closed it), an error or unexpected bytes
// all mean it cannot carry another request.
func alive(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, e := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = e == syscall.EAGAIN || e == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && open
}
