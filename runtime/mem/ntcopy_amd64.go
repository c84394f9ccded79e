package mem

import "unsafe"

// copyStream copies len(dst) (== len(src)) bytes: a plain copy up to dst's
// next 64-byte boundary, the bulk in 64-byte non-temporal stores
// (streamBulk), the rest plain.
func copyStream(dst, src []byte) int {
	n := len(dst)
	head := int((64 - uintptr(unsafe.Pointer(unsafe.SliceData(dst)))%64) % 64)
	copy(dst[:head], src[:head])
	bulk := (n - head) / 64 * 64
	if bulk > 0 {
		streamBulk(unsafe.Pointer(&dst[head]), unsafe.Pointer(&src[head]), uintptr(bulk))
	}
	copy(dst[head+bulk:], src[head+bulk:])
	return n
}

// streamBulk copies n bytes (a multiple of 64) from src to dst (64-byte
// aligned) with MOVOU loads and MOVNTO (MOVNTDQ) stores, then SFENCE so the
// stores are ordered before anything the caller does next. SSE2 only: every
// amd64 CPU has it. Implemented in ntcopy_amd64.s.
//
//go:noescape
func streamBulk(dst, src unsafe.Pointer, n uintptr)
