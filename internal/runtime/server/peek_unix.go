//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package server

import (
	"errors"
	"net"
	"syscall"
)

// clientGone waits, without consuming a byte, until the client's side of
// conn shows it has left: an orderly close (a zero-length read) or an
// error such as a reset. It parks in the runtime's network poller — no
// thread, no polling — until the socket becomes readable or the read
// deadline set on conn passes. Bytes waiting to be read (a pipelined
// request) mean the client is still there; nothing more can be told
// without reading them, so it stops watching and reports false. It
// reports false as well when conn is not a socket it can peek at.
//
// The peek is recv(2) with MSG_PEEK|MSG_DONTWAIT: the bytes stay in the
// socket for fasthttp to read the next request.
func clientGone(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var buf [1]byte
	gone := false
	err = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
			return false // nothing to read yet: wait until the socket is readable
		case err != nil:
			gone = true // reset, or otherwise broken
		case n == 0:
			gone = true // the client closed its side
		}
		return true
	})
	return gone && err == nil
}

// canWatch reports whether clientGone can watch conn.
func canWatch(conn net.Conn) bool {
	_, ok := conn.(syscall.Conn)
	return ok
}
