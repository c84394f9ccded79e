//go:build !amd64

package mem

func copyStream(dst, src []byte) int { return copy(dst, src) }
