package main

/*
#include <stdlib.h>
#include "hit.h"

// memtier_readv_ex of context id, target CPU, for the tests.
static int mt_test_readv(uint64_t id, const char* path, memtier_iovec_t* iov, size_t n, uint32_t flags) {
    return memtier_readv_ex((memtier_ctx_t*)(uintptr_t)id, path, iov, n, MEMTIER_TARGET_CPU, flags);
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/memtier/memtier/runtime/engine"
	"github.com/memtier/memtier/runtime/hitidx"
)

// The C-side hit path (hit.c): memtier_read serves a DRAM-cache hit in C
// from the context's hit region (runtime/hitidx) when it can, and calls
// mtgo_read otherwise. Here the regions are registered and unregistered with
// the contexts.

var layoutOnce = sync.OnceValue(hitLayoutMismatch)

// hitLayoutMismatch compares hit.h's offsets with runtime/hitidx's; "" when
// they agree. A mismatch keeps every context off the C path.
func hitLayoutMismatch() string {
	pairs := [...][2]uintptr{
		{C.MT_HIT_HDR_MAGIC, hitidx.HdrMagic}, {C.MT_HIT_HDR_FILE_MASK, hitidx.HdrFileMask},
		{C.MT_HIT_HDR_BLOCK_MASK, hitidx.HdrBlockMask}, {C.MT_HIT_HDR_BLOCK_SHIFT, hitidx.HdrBlockShift},
		{C.MT_HIT_HDR_MODE, hitidx.HdrMode}, {C.MT_HIT_HDR_TRUST_NS, hitidx.HdrTrustNs},
		{C.MT_HIT_HDR_RECHECK_NS, hitidx.HdrRecheckNs}, {C.MT_HIT_HDR_MONO_OFFSET, hitidx.HdrMonoOffset},
		{C.MT_HIT_HDR_FILE_OFF, hitidx.HdrFileOff}, {C.MT_HIT_HDR_BLOCK_OFF, hitidx.HdrBlockOff},
		{C.MT_HIT_HDR_HINT_OFF, hitidx.HdrHintOff}, {C.MT_HIT_HDR_HINT_MASK, hitidx.HdrHintMask},
		{C.MT_HIT_HINT_ENTRY, hitidx.HintEntry}, {C.MT_HIT_HINT_STAMP, hitidx.HintStamp},
		{C.MT_HIT_CTR_CHECKED, hitidx.CtrChecked}, {C.MT_HIT_CTR_TRUSTED, hitidx.CtrTrusted},
		{C.MT_HIT_CTR_BYTES, hitidx.CtrBytes}, {C.MT_HIT_CTR_READV_CALLS, hitidx.CtrReadvCalls},
		{C.MT_HIT_CTR_READV_CHECKED, hitidx.CtrReadvChecked}, {C.MT_HIT_CTR_READV_HITS, hitidx.CtrReadvHits},
		{C.MT_HIT_CTR_HINT_MISSES, hitidx.CtrHintMisses}, {C.MT_HIT_CTR_EXTRA_BLOCKS, hitidx.CtrExtraBlocks},
		{C.MT_HIT_FILE_SEQ, hitidx.FileSeq}, {C.MT_HIT_FILE_VERSION, hitidx.FileVersion},
		{C.MT_HIT_FILE_SIZE, hitidx.FileSize}, {C.MT_HIT_FILE_DEV, hitidx.FileDev},
		{C.MT_HIT_FILE_INO, hitidx.FileIno}, {C.MT_HIT_FILE_MTIME, hitidx.FileMtime},
		{C.MT_HIT_FILE_CTIME, hitidx.FileCtime}, {C.MT_HIT_FILE_RESOLVED, hitidx.FileResolved},
		{C.MT_HIT_FILE_CHECKED, hitidx.FileChecked}, {C.MT_HIT_FILE_FD, hitidx.FileFD},
		{C.MT_HIT_FILE_PATH_LEN, hitidx.FilePathLen}, {C.MT_HIT_FILE_TOUCHED, hitidx.FileTouched},
		{C.MT_HIT_FILE_PATH, hitidx.FilePath}, {C.MT_HIT_FILE_ENTRY, hitidx.FileEntry},
		{C.MT_HIT_MAX_PATH, hitidx.MaxPath},
		{C.MT_HIT_BLOCK_SEQ, hitidx.BlockSeq}, {C.MT_HIT_BLOCK_FILE, hitidx.BlockFile},
		{C.MT_HIT_BLOCK_INDEX, hitidx.BlockIndex}, {C.MT_HIT_BLOCK_ADDR, hitidx.BlockAddr},
		{C.MT_HIT_BLOCK_VALID, hitidx.BlockValid}, {C.MT_HIT_BLOCK_REF, hitidx.BlockRef},
		{C.MT_HIT_BLOCK_ENTRY, hitidx.BlockEntry},
		{C.MT_HIT_MODE_STRICT, hitidx.ModeStrict}, {C.MT_HIT_MODE_INTERVAL, hitidx.ModeInterval},
		{C.MT_HIT_MODE_OPEN, hitidx.ModeOpen},
		{C.MT_HIT_READV_MAX, maxReadvElements},
	}
	for i, p := range pairs {
		if p[0] != p[1] {
			return fmt.Sprintf("hit.h and runtime/hitidx disagree at pair %d: %d != %d", i, p[0], p[1])
		}
	}
	if uint64(C.MT_HIT_MAGIC) != hitidx.Magic {
		return "hit.h and runtime/hitidx disagree on the magic"
	}
	for _, p := range []string{"", "/", "/tmp/a.bin", "relative/path/of/seventeen", "/x/" + string(make([]byte, 40))} {
		cs := C.CString(p)
		h := uint64(C.mt_hit_path_hash(cs, C.uint64_t(len(p))))
		C.free(unsafe.Pointer(cs))
		if h != hitidx.PathHash(p) {
			return fmt.Sprintf("path hash of %q: C %#x, Go %#x", p, h, hitidx.PathHash(p))
		}
	}
	for _, k := range [][4]uint64{{1, 0, 1, 0}, {7, 3, 1<<15 - 1, 1<<13 - 1}, {1 << 40, 1<<32 + 5, 1<<20 - 1, 1<<18 - 1}} {
		var b, h, tag C.uint64_t
		C.mt_hit_slots(C.uint64_t(k[0]), C.uint64_t(k[1]), C.uint64_t(k[2]), C.uint64_t(k[3]), &b, &h, &tag)
		gb, gh, gt := hitidx.BlockSlot(k[0], k[1], k[2]), hitidx.HintSlot(k[0], k[1], k[3]), hitidx.HintTag(k[0], k[1])
		if uint64(b) != gb || uint64(h) != gh || uint64(tag) != gt {
			return fmt.Sprintf("slots of block %v: C %d/%d/%d, Go %d/%d/%d", k, b, h, tag, gb, gh, gt)
		}
	}
	return ""
}

// hitRegister lets memtier_read serve context id's hits in C. The caller
// holds the registry lock.
func hitRegister(id uint64, c *engine.Context) {
	if p := c.HitIndex(); p != nil && layoutOnce() == "" {
		C.mt_hit_register(C.uint64_t(id), p)
	}
}

// hitUnregister stops C-side hits of context id and waits for the C readers
// in flight, so the context may be closed (and its memory unmapped) next.
// The caller holds the registry lock.
func hitUnregister(id uint64) { C.mt_hit_unregister(C.uint64_t(id)) }

// hitRead is mt_hit_read for the capi tests (hit_test.go): whether C served
// the read of [off, off+len(dst)) of path on context id into dst.
func hitRead(id uint64, path string, off uint64, dst unsafe.Pointer, size uint64, flags uint32) bool {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	return C.mt_hit_read(C.uint64_t(id), cs, C.uint64_t(off), C.uint64_t(size), dst, C.uint32_t(flags)) == 1
}

// hitCopy copies src into dst (same length) with hit.c's copy and returns
// the copy it picked (hitcopy.h: 0 memcpy, 1 rep movsb, 2 AVX2), for the
// copy test. The slices are Go memory that C does not keep.
func hitCopy(dst, src []byte) int {
	if len(src) == 0 {
		return int(C.mt_hit_copy_test(nil, nil, 0))
	}
	return int(C.mt_hit_copy_test(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), C.uint64_t(len(src))))
}

// hitCopyStream is hitCopy with the streaming-store copy of a large readv.
func hitCopyStream(dst, src []byte) int {
	if len(src) == 0 {
		return int(C.mt_hit_copy_stream_test(nil, nil, 0))
	}
	return int(C.mt_hit_copy_stream_test(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), C.uint64_t(len(src))))
}

// cPathBuf is n bytes of C memory for a path the tests rewrite in place
// (setCPath; C.free it with cPathFree), and hitReadCPath is hitRead of the
// path in it: a caller that reuses one buffer for other paths.
func cPathBuf(n int) unsafe.Pointer { return C.calloc(1, C.size_t(n)) }

func cPathFree(p unsafe.Pointer) { C.free(p) }

func setCPath(p unsafe.Pointer, s string) {
	b := unsafe.Slice((*byte)(p), len(s)+1)
	copy(b, s)
	b[len(s)] = 0
}

func hitReadCPath(id uint64, p unsafe.Pointer, off uint64, dst unsafe.Pointer, size uint64, flags uint32) bool {
	return C.mt_hit_read(C.uint64_t(id), (*C.char)(p), C.uint64_t(off), C.uint64_t(size), dst, C.uint32_t(flags)) == 1
}

// hitReadv is mt_hit_readv for the capi tests (hitv_test.go): whether C
// served the whole call. The elements' destinations must be C memory or
// pinned by the caller for the call; iov is copied into C memory and the
// results copied back.
func hitReadv(id uint64, path string, iov []hitIOVec, flags uint32) bool {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	n := len(iov)
	if n == 0 {
		return C.mt_hit_readv(C.uint64_t(id), cs, nil, 0, C.uint32_t(flags)) == 1 // n = 0: never
	}
	cv := (*C.memtier_iovec_t)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(iov[0]))))
	defer C.free(unsafe.Pointer(cv))
	s := unsafe.Slice(cv, n)
	copy(s, iov)
	ok := C.mt_hit_readv(C.uint64_t(id), cs, cv, C.uint64_t(n), C.uint32_t(flags)) == C.uint64_t(n)
	copy(iov, s)
	return ok
}

// readvC is memtier_readv_ex (target CPU) of context id for the capi tests:
// the C hits, then Go for the rest. Returns the status.
func readvC(id uint64, path string, iov []hitIOVec, flags uint32) int {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	n := len(iov)
	cv := (*C.memtier_iovec_t)(C.calloc(C.size_t(n+1), C.size_t(unsafe.Sizeof(C.memtier_iovec_t{}))))
	defer C.free(unsafe.Pointer(cv))
	s := unsafe.Slice(cv, n)
	copy(s, iov)
	rc := int(C.mt_test_readv(C.uint64_t(id), cs, cv, C.size_t(n), C.uint32_t(flags)))
	copy(iov, s)
	return rc
}

// hitIOVec is memtier_iovec_t, named for the tests (they cannot import "C").
type hitIOVec = C.memtier_iovec_t

// cIOVec is one memtier_iovec_t for the tests: dst is C memory of size bytes
// (cFree releases it), path NULL unless given.
func cIOVec(off, size uint64, path string) hitIOVec {
	v := C.memtier_iovec_t{offset: C.uint64_t(off), size: C.uint64_t(size)}
	if size > 0 {
		v.dst = C.calloc(1, C.size_t(size))
	}
	if path != "" {
		v.path = C.CString(path)
	}
	return v
}

// cIOVecBytes is the size bytes at v.dst, and cIOVecFree releases v's C memory.
func cIOVecBytes(v hitIOVec) []byte {
	if v.dst == nil {
		return nil
	}
	return C.GoBytes(v.dst, C.int(v.size))
}

func cIOVecFree(v hitIOVec) {
	C.free(v.dst)
	C.free(unsafe.Pointer(v.path))
}

func cIOVecResult(v hitIOVec) int64 { return int64(v.result) }

// C_uint64 is C.uint64_t for the tests.
type C_uint64 = C.uint64_t
