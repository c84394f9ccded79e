/* The C-side DRAM-cache hit path of memtier_read (internal, not installed).
 *
 * A context's hit region is mmap'd and written by Go (runtime/hitidx); the
 * offsets below are that package's layout, checked against it by capi/hit.go
 * before a region is registered. hit.c reads it without entering Go. */
#ifndef MEMTIER_HIT_H
#define MEMTIER_HIT_H
#include <stdint.h>

#include "memtier.h"

/* Internal to libmemtier.so: not exported. */
#define MT_HIT_API __attribute__((visibility("hidden")))

#define MT_HIT_MAGIC 0x4d54484954583033ull /* "MTHITX03" */

/* header */
#define MT_HIT_HDR_MAGIC 0
#define MT_HIT_HDR_FILE_MASK 8
#define MT_HIT_HDR_BLOCK_MASK 16
#define MT_HIT_HDR_BLOCK_SHIFT 24
#define MT_HIT_HDR_MODE 32
#define MT_HIT_HDR_TRUST_NS 40
#define MT_HIT_HDR_RECHECK_NS 48
#define MT_HIT_HDR_MONO_OFFSET 56
#define MT_HIT_HDR_FILE_OFF 64
#define MT_HIT_HDR_BLOCK_OFF 72
#define MT_HIT_HDR_HINT_OFF 80
#define MT_HIT_HDR_HINT_MASK 88
#define MT_HIT_CTR_CHECKED 128
#define MT_HIT_CTR_TRUSTED 136
#define MT_HIT_CTR_BYTES 144
#define MT_HIT_CTR_READV_CALLS 152
#define MT_HIT_CTR_READV_CHECKED 160
#define MT_HIT_CTR_READV_HITS 168
#define MT_HIT_CTR_HINT_MISSES 176
#define MT_HIT_CTR_EXTRA_BLOCKS 184

/* file entry */
#define MT_HIT_FILE_SEQ 0
#define MT_HIT_FILE_VERSION 8
#define MT_HIT_FILE_SIZE 16
#define MT_HIT_FILE_DEV 24
#define MT_HIT_FILE_INO 32
#define MT_HIT_FILE_MTIME 40
#define MT_HIT_FILE_CTIME 48
#define MT_HIT_FILE_RESOLVED 56
#define MT_HIT_FILE_CHECKED 64
#define MT_HIT_FILE_FD 72
#define MT_HIT_FILE_PATH_LEN 80
#define MT_HIT_FILE_TOUCHED 88
#define MT_HIT_FILE_PATH 96
#define MT_HIT_FILE_ENTRY 512
#define MT_HIT_MAX_PATH (MT_HIT_FILE_ENTRY - MT_HIT_FILE_PATH - 1)

/* block entry */
#define MT_HIT_BLOCK_SEQ 0
#define MT_HIT_BLOCK_FILE 8
#define MT_HIT_BLOCK_INDEX 16
#define MT_HIT_BLOCK_ADDR 24
#define MT_HIT_BLOCK_VALID 32
#define MT_HIT_BLOCK_REF 40
#define MT_HIT_BLOCK_ENTRY 64

/* address hint (runtime/hitidx.HintEntry): the address word (address | tag),
 * then the sequence value of the entry that named it */
#define MT_HIT_HINT_ENTRY 16
#define MT_HIT_HINT_STAMP 8

/* The most elements memtier_readv takes (capi/exports_io.go maxReadvElements):
 * larger calls go to Go, which refuses them. */
#define MT_HIT_READV_MAX (1u << 24)

/* freshness modes */
#define MT_HIT_MODE_STRICT 0
#define MT_HIT_MODE_INTERVAL 1
#define MT_HIT_MODE_OPEN 2

/* mt_hit_register makes region (a hitidx region, mapped until
 * mt_hit_unregister(id) returns) the hit index of context id. Returns 0, or
 * -1 when every slot it may use is taken (the context then reads through Go
 * only). Called from Go under capi's registry lock. */
MT_HIT_API int mt_hit_register(uint64_t id, void* region);

/* mt_hit_unregister stops C-side hits of context id and waits until no C
 * reader uses its region any more; afterwards the region may be unmapped.
 * Unknown ids are ignored. Called from Go under capi's registry lock. */
MT_HIT_API void mt_hit_unregister(uint64_t id);

/* mt_hit_read serves memtier_read_ex(ctx id, path, offset, size, dst,
 * MEMTIER_TARGET_CPU, flags) from the DRAM cache in C when it can: returns 1
 * when all size bytes were copied to dst and counted, 0 when Go must serve
 * the call (not cached, not indexed, a check that only Go makes, a race with
 * a change, or a fault on dst); dst may hold any bytes then. Thread-safe. */
MT_HIT_API int mt_hit_read(uint64_t id, const char* path, uint64_t offset, uint64_t size, void* dst, uint32_t flags);

/* mt_hit_readv serves what it can of memtier_readv_ex(ctx id, path, iov, n,
 * MEMTIER_TARGET_CPU, flags) from the DRAM cache in C: the elements that name
 * no path of their own (iov[k].path NULL), have a size above 0 and lie inside
 * one valid cache block of the file. The file is looked up and checked
 * (strict: one fstat) once for the call. Every element's result is set: its
 * size when served, 0 when Go must serve it. Returns the number served: n
 * when the whole call was served and counted (one readv call, one hit per
 * element, one revalidation when checked); fewer when only the hits were
 * counted (one request and one inline hit each) and Go must serve the rest
 * in one call, which counts the call; 0 when Go must serve all of it
 * (nothing counted; dsts may hold any bytes). Thread-safe. */
MT_HIT_API uint64_t mt_hit_readv(uint64_t id, const char* path, memtier_iovec_t* iov, uint64_t n, uint32_t flags);

/* mt_hit_path_hash is runtime/hitidx.PathHash of p[0:n] (for the layout test). */
MT_HIT_API uint64_t mt_hit_path_hash(const char* p, uint64_t n);

/* mt_hit_slots sets *block, *hint and *tag to runtime/hitidx.BlockSlot,
 * HintSlot and HintTag of block (file version, index) (for the layout test). */
MT_HIT_API void mt_hit_slots(uint64_t file, uint64_t index, uint64_t block_mask, uint64_t hint_mask,
                             uint64_t* block, uint64_t* hint, uint64_t* tag);

/* mt_hit_copy_test copies n bytes from src to dst with the hit path's copy
 * (hitcopy.h) and returns the copy it picked (0 memcpy, 1 rep movsb, 2 the
 * AVX2 loop; for the copy test). */
MT_HIT_API int mt_hit_copy_test(void* dst, const void* src, uint64_t n);

/* mt_hit_copy_stream_test: mt_hit_copy_test with the streaming-store copy
 * of a large readv (and its fence), for tests only. */
MT_HIT_API int mt_hit_copy_stream_test(void* dst, const void* src, uint64_t n);

#endif
