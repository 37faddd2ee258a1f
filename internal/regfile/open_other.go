//go:build !unix

package regfile

const openFlags = 0
