//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package server

import "net"

// clientGone cannot peek at sockets on this system: a client that leaves
// is noticed only when a write to it fails.
func clientGone(net.Conn) bool { return false }

// canWatch reports false: see clientGone.
func canWatch(net.Conn) bool { return false }
