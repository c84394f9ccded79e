/*
 * memtier.h: the C API of MemTier, a user-level, GPU-aware data supply runtime.
 *
 * MemTier reads byte ranges of files (model weights, checkpoint tensors, dataset
 * samples, RAG chunks, KV blocks) into caller memory by the fastest correct path:
 * buffered pread, O_DIRECT with aligned bounce buffers, a userspace DRAM block
 * cache, and (in builds with MEMTIER_ENABLE_CUDA / MEMTIER_ENABLE_GDS) GPU paths.
 *
 * Threading: every function is safe to call from many threads at once on one
 * context. Several contexts may live in one process. Calls with a NULL, finalized
 * or otherwise invalid handle fail with a status; they never crash.
 *
 * Ownership: MemTier never keeps a caller pointer after a synchronous call returns.
 * Asynchronous calls (memtier_read_async, memtier_prefetch_async) use the caller's
 * destination until the request completes; the caller keeps it valid until
 * memtier_request_wait or memtier_request_test reports completion.
 *
 * Errors: every function that can fail returns a memtier_status (0 = success,
 * negative = error). memtier_strerror() names a status; memtier_last_error() gives
 * the detail (path, offset, errno text) of the last failure on the calling thread.
 *
 * Fork: the Go runtime inside libmemtier.so starts when the library is loaded
 * (at program start when linked with -lmemtier) and does not survive fork(). In
 * a forked child every function returns MEMTIER_ERR_FORKED at once, without
 * entering Go, whether or not the parent called MemTier, except the pure C
 * ones: memtier_pread_batch, the error texts and the version. Use MemTier in a
 * freshly exec'd process (spawn / forkserver in Python).
 *
 * Stability: status values, struct layouts and function signatures below are
 * append-only: values are never renumbered and fields are only added at the
 * end of a struct. One ABI growth rule decides how a struct may grow:
 *  - an input struct (the caller fills it: memtier_config_t,
 *    memtier_prefetch_opts_t) carries uint32_t struct_size as its first field;
 *    the library reads only those bytes and uses defaults for the rest;
 *  - an output struct (the library fills it: memtier_stats_t,
 *    memtier_config_t from memtier_get_config) is written through a size
 *    argument (memtier_stats_sized, memtier_get_config): the library writes
 *    min(that size, its own size) bytes and never past them;
 *  - an array element (memtier_iovec_t, memtier_chunk_t) is frozen: its size
 *    and layout never change; a new field means a new element type and call.
 * Testing hooks, which only MemTier's own tests use, come last, after the
 * stable part, and are declared only when MEMTIER_TESTING_API is defined
 * before this header is included (as zstd.h gates ZSTD_STATIC_LINKING_ONLY).
 *
 * Single source: this header is the one place that defines the statuses and
 * their texts, the flags, paths and modes, the config and stats fields and
 * the version. tools/mtgen (`go generate ./...`) writes every other copy
 * (the Go tables of capi, memtier_strerror, the Python cdef and constants,
 * the README tables, the examples' name tables) from it, and its check mode
 * (`go run ./tools/mtgen -check`, run by `go test ./...`) fails when one is
 * stale. The generator reads the regular shapes used below: one enumerator
 * or field per line, its comment after it, continued on lines of their own.
 *
 * Doc template: every function's comment starts "name: summary", then has
 * "Returns:" on a line of its own with one status (or value) per line below
 * it, each saying when, then "Thread safety:" and "Since: <version>" (or
 * "Since: after <version>" for calls added since that release). The
 * statuses listed are those the call itself returns; MEMTIER_ERR_INTERNAL
 * (a recovered panic, a bug) may come from any call that enters Go and is
 * not repeated. tools/mtgen's check fails for a function without it.
 */
#ifndef MEMTIER_H
#define MEMTIER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MEMTIER_API __attribute__((visibility("default")))
#else
#define MEMTIER_API
#endif

/* ===================================================================== */
/* Version                                                                */
/* ===================================================================== */

#define MEMTIER_VERSION_MAJOR 0
#define MEMTIER_VERSION_MINOR 3
#define MEMTIER_VERSION_PATCH 0
#define MEMTIER_VERSION_NUMBER \
    (MEMTIER_VERSION_MAJOR * 10000 + MEMTIER_VERSION_MINOR * 100 + MEMTIER_VERSION_PATCH)
#define MEMTIER_VERSION_STRING "0.3.0"

/* ===================================================================== */
/* Status codes                                                           */
/* ===================================================================== */

/* memtier_status: 0 is success, errors are negative. Values are pinned. Each
 * enumerator's comment starts with its memtier_strerror text in quotes, then
 * says when a call returns it. */
typedef enum memtier_status {
    MEMTIER_OK = 0,               /* "success" */
    MEMTIER_ERR_INVALID_ARG = -1, /* "invalid argument": NULL pointer, unknown flag bit, */
                                  /* offset + size overflow, a field out of range        */
    MEMTIER_ERR_NOT_FOUND = -2,   /* "file not found": ENOENT, no such file or object    */
    MEMTIER_ERR_PERMISSION = -3,  /* "permission denied": open refused (EACCES/EPERM)    */
    MEMTIER_ERR_EOF = -4,         /* "range past end of file": the range runs past end   */
                                  /* of file (never a silent short read)                 */
    MEMTIER_ERR_IO = -5,          /* "I/O error": any other I/O error (EIO, EFAULT, ...) */
    MEMTIER_ERR_NOMEM = -6,       /* "out of memory": allocation failed                  */
    MEMTIER_ERR_UNSUPPORTED = -7, /* "unsupported in this build or configuration (e.g.   */
                                  /* GPU target)": GPU target or TO_HBM without a usable */
                                  /* libcuda, gds_mode REQUIRED without GDS, prefetch    */
                                  /* with the cache off                                  */
    MEMTIER_ERR_CLOSED = -8,      /* "context or request is finalized or unknown"        */
    MEMTIER_ERR_BUSY = -9,        /* "request still running": memtier_request_test       */
    MEMTIER_ERR_TIMEOUT = -10,    /* "timed out": wait timed out; request still running  */
    MEMTIER_ERR_FORMAT = -11,     /* "malformed input (file format, index or             */
                                  /* configuration value)": a malformed file format or   */
                                  /* MEMTIER_* value                                     */
    MEMTIER_ERR_IS_DIR = -12,     /* "path is a directory": EISDIR                       */
    MEMTIER_ERR_INTERNAL = -13,   /* "internal error (recovered panic)": a bug in        */
                                  /* MemTier; please report it                           */
    MEMTIER_ERR_FORKED = -14,     /* "called in a forked child process": called in a     */
                                  /* child after fork()                                  */
    MEMTIER_ERR_DIRECT_IO = -15,  /* "O_DIRECT required but refused by the file system"  */
    MEMTIER_ERR_NOT_REGULAR = -16, /* "not a regular file (device, FIFO, socket,         */
                                   /* procfs/sysfs)": their sizes are not real           */
    MEMTIER_ERR_INTERRUPTED = -17  /* "interrupted": memtier_interrupt, or the context's  */
                                   /* interrupt check, stopped the call's remote         */
                                   /* requests (see memtier_set_interrupt_check)         */
} memtier_status;

/* memtier_strerror: static English text of a status (the quoted text of its
 * comment above), never NULL; unknown values give "unknown status".
 * Returns:
 *   the text (static storage: never free it)
 * Thread safety: safe from any thread; pure C, so it also works in a forked
 *   child.
 * Since: 0.1. */
MEMTIER_API const char* memtier_strerror(int status);

/* memtier_last_error: detail of the last failed MemTier call on the calling
 * thread (path, offset, errno text), "" if none.
 * Returns:
 *   the text, never NULL; valid until the next MemTier call on this thread
 *   (copy it to keep it)
 * Thread safety: safe; each thread has its own message.
 * Since: 0.1. */
MEMTIER_API const char* memtier_last_error(void);

/* memtier_version: the library's version string, e.g. "0.3.0". Compare with
 * MEMTIER_VERSION_STRING to detect a header/library mismatch.
 * Returns:
 *   the version (static storage), never NULL
 * Thread safety: safe from any thread.
 * Since: 0.1. */
MEMTIER_API const char* memtier_version(void);

/* memtier_version_number: MEMTIER_VERSION_NUMBER of the library.
 * Returns:
 *   major * 10000 + minor * 100 + patch
 * Thread safety: safe from any thread.
 * Since: 0.1. */
MEMTIER_API int memtier_version_number(void);

/* ===================================================================== */
/* Handles, targets, flags                                                */
/* ===================================================================== */

/* An opaque context: configuration, open-file table, DRAM cache, worker pool,
 * stats. Never dereference it. */
typedef struct memtier_ctx memtier_ctx_t;

/* An opaque asynchronous request (read or prefetch). */
typedef struct memtier_request memtier_request_t;

/* Destination memory of a read. */
#define MEMTIER_TARGET_CPU 0  /* host memory                                  */
#define MEMTIER_TARGET_CUDA 1 /* device pointer; MEMTIER_ERR_UNSUPPORTED in   */
                              /* builds without MEMTIER_ENABLE_CUDA           */

/* Per-call hints for memtier_read_ex (bit flags, OR them). */
#define MEMTIER_READ_DEFAULT 0u
#define MEMTIER_READ_ONCE 1u       /* do not admit into the DRAM cache; a cold  */
                                   /* read of direct_threshold bytes or more may */
                                   /* then skip the page cache too (O_DIRECT,    */
                                   /* when the device probe finds it faster)     */
#define MEMTIER_READ_WILL_REUSE 2u /* admit into the DRAM cache whatever size   */
#define MEMTIER_READ_DIRECT 4u     /* prefer O_DIRECT for bytes not cached      */
#define MEMTIER_READ_BUFFERED 8u   /* never O_DIRECT for this call              */
#define MEMTIER_READ_IMMUTABLE 16u /* 0.3: the caller declares the file's bytes  */
                                   /* immutable: this call trusts the version  */
                                   /* checked last (no freshness syscall), as  */
                                   /* MEMTIER_FRESHNESS_OPEN does for a context */

/* Freshness of a context (memtier_config_t.freshness; 0.3): how often a read
 * checks that an open file still holds the bytes its cache blocks were read
 * from. Whatever the setting, a file is checked when it is first opened (and
 * reopened after its descriptor was evicted or dropped), and cached bytes are
 * always bound to the version they were read from; the setting only bounds how
 * long a change can go unnoticed by a context that already has the file open.
 * Each check is counted in memtier_stats_t.revalidations. */
#define MEMTIER_FRESHNESS_STRICT 0   /* default: every call checks the open file  */
                                     /* (one fstat; the path itself is re-stat'ed */
                                     /* every path_recheck_ms): never stale       */
#define MEMTIER_FRESHNESS_INTERVAL 1 /* a file checked less than                  */
                                     /* freshness_interval_ms ago is trusted:     */
                                     /* a change is seen within that bound        */
#define MEMTIER_FRESHNESS_OPEN 2     /* checked at open only: for data the caller */
                                     /* declares immutable (published checkpoints,*/
                                     /* dataset shards); a file rewritten in place*/
                                     /* may then be served stale until            */
                                     /* memtier_drop_cache                        */

/* O_DIRECT mode of a context (memtier_config_t.direct_mode). */
#define MEMTIER_DIRECT_AUTO 0     /* policy decides; refused O_DIRECT falls back  */
#define MEMTIER_DIRECT_OFF 1      /* always buffered pread                        */
#define MEMTIER_DIRECT_ALWAYS 2   /* O_DIRECT for every uncached byte; a file     */
                                  /* system that refuses it falls back (counted)  */
#define MEMTIER_DIRECT_REQUIRED 3 /* like ALWAYS, but refusal is an error:        */
                                  /* MEMTIER_ERR_DIRECT_IO                        */

/* Paths a request can take (memtier_decision_t.path, memtier_path_name). */
#define MEMTIER_PATH_CACHE 0    /* copied out of the DRAM cache               */
#define MEMTIER_PATH_BUFFERED 1 /* pread through the page cache               */
#define MEMTIER_PATH_DIRECT 2   /* O_DIRECT (aligned, or via bounce buffers)  */
#define MEMTIER_PATH_GDS 3      /* GPUDirect Storage (GPU builds)             */
#define MEMTIER_PATH_STAGED 4   /* host staging + copy to device (GPU builds) */
#define MEMTIER_PATH_NONE 5     /* nothing to read (size 0) or refused        */
#define MEMTIER_PATH_HBM 6      /* device-to-device copy from the HBM cache   */
                                /* (target CUDA after prefetch TO_HBM; 0.2)   */

/* GPUDirect Storage mode of a context (memtier_config_t.gds_mode; 0.2). */
#define MEMTIER_GDS_AUTO 0     /* GDS for uncached GPU reads of at least       */
                               /* gds_threshold_bytes whose offset and size    */
                               /* are 4 KiB aligned; anything GDS cannot serve */
                               /* (cuFile missing, file system unsupported, a  */
                               /* read error) is read staged instead, counted  */
                               /* in gds_fallbacks and not retried for that    */
                               /* file version                                 */
#define MEMTIER_GDS_OFF 1      /* never GDS: GPU reads go through pinned host  */
                               /* buffers (staged)                             */
#define MEMTIER_GDS_REQUIRED 2 /* GDS for every uncached GPU byte, whatever its*/
                               /* size or alignment; memtier_init fails with   */
                               /* MEMTIER_ERR_UNSUPPORTED when GDS is not      */
                               /* usable, and a read GDS cannot serve fails    */
                               /* instead of falling back                      */

/* ===================================================================== */
/* Configuration and lifecycle                                            */
/* ===================================================================== */

/* memtier_config_t: settings of a context. Fill it with memtier_config_default,
 * change fields, pass it to memtier_init. struct_size lets the struct grow: the
 * library reads only the first struct_size bytes and uses defaults for the rest.
 * Sizes are bytes; 0 in a size or count field means "the default". */
typedef struct memtier_config {
    uint32_t struct_size;            /* sizeof(memtier_config_t), set by _default */
    uint32_t io_threads;             /* I/O worker goroutines; default 4          */
    uint64_t cache_bytes;            /* DRAM cache budget; default 1 GiB;         */
                                     /* cache_enabled = 0 turns the cache off     */
    uint64_t cache_block_bytes;      /* cache block, power of two; default 64 KiB */
    uint64_t cache_admit_max_bytes;  /* larger requests bypass the cache unless   */
                                     /* MEMTIER_READ_WILL_REUSE; default 16 MiB   */
    uint64_t task_bytes;             /* large reads are split into tasks of this  */
                                     /* size run in parallel; default 4 MiB       */
    uint64_t direct_threshold_bytes; /* AUTO mode: READ_ONCE reads at least this  */
                                     /* large and not in the page cache may go    */
                                     /* O_DIRECT (0.3: other cold reads stay      */
                                     /* buffered, leaving the page cache warm for */
                                     /* the next process); default 8 MiB          */
    int32_t direct_mode;             /* MEMTIER_DIRECT_*; default AUTO            */
    int32_t cache_enabled;           /* 1 (default) or 0                          */
    uint32_t max_open_files;         /* descriptor table bound; default 128       */
    uint32_t gomaxprocs;             /* Go scheduler threads; 0 = leave as is     */
    uint64_t gds_threshold_bytes;    /* GPU builds: min size for GDS; default 1MiB*/
    uint32_t max_inflight_mib;       /* bounce/task memory cap in MiB; default 64 */
    uint32_t small_io_depth;         /* readv: reads in flight at once; default 32*/
    int32_t path_recheck_ms;         /* staleness check: every call fstats the open */
                                     /* descriptor (catches writes, truncation,   */
                                     /* replacement by rename); the path itself is */
                                     /* re-resolved with stat after this many ms   */
                                     /* (directory/symlink swaps). Default 1000;   */
                                     /* -1 = stat the path on every call           */
    uint32_t reserved0;
    /* Added in 0.2 (GPU builds; read only when struct_size covers them:
     * memtier_config_default fills them when called through this header). */
    uint64_t hbm_cache_bytes;        /* budget of the device-memory (HBM) cache    */
                                     /* that MEMTIER_PREFETCH_TO_HBM fills;        */
                                     /* default 1 GiB, allocated in 2 MiB blocks   */
                                     /* by TO_HBM prefetches only (never before);  */
                                     /* MEMTIER_HBM_CACHE_BYTES=0 turns the tier   */
                                     /* off (get_config then shows 0)              */
    int32_t gds_mode;                /* MEMTIER_GDS_*; default AUTO                */
    int32_t hbm_device;              /* CUDA device ordinal of the HBM cache;      */
                                     /* default 0                                  */
    /* Added in 0.3. */
    int32_t freshness;               /* MEMTIER_FRESHNESS_*; default STRICT        */
    int32_t freshness_interval_ms;   /* INTERVAL: how long a checked file is       */
                                     /* trusted, in ms; 0 = default 100            */
} memtier_config_t;

/* memtier_config_default: fills *cfg with the defaults, then applies the
 * MEMTIER_* environment variables (see README). Fields set by code after this
 * call win over the environment. Code compiled against this header reaches
 * memtier_config_default_sized through the macro below; the exported function
 * of this name writes the 0.1 layout (88 bytes).
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL cfg)
 *   MEMTIER_ERR_FORMAT (an environment value does not parse or is outside
 *     its range; memtier_last_error names the variable; *cfg then holds the
 *     defaults)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from any thread (it only reads the environment).
 * Since: 0.1. */
MEMTIER_API int memtier_config_default(memtier_config_t* cfg);

/* memtier_config_default_sized: memtier_config_default for a config struct of
 * cfg_size bytes (pass sizeof(memtier_config_t)); writes min(cfg_size, library
 * size) bytes and sets struct_size to that. The exported memtier_config_default
 * always writes the 0.1 layout (88 bytes), so FFI callers whose struct has the
 * later fields use this to get their defaults.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL cfg, cfg_size < 8)
 *   MEMTIER_ERR_FORMAT (an environment value does not parse or is outside
 *     its range; *cfg then holds the defaults)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from any thread (it only reads the environment).
 * Since: 0.1. */
MEMTIER_API int memtier_config_default_sized(memtier_config_t* cfg, size_t cfg_size);

/* Code compiled against this header gets every field of its memtier_config_t:
 * memtier_config_default(cfg) is memtier_config_default_sized(cfg,
 * sizeof(memtier_config_t)). The exported function of that name (what older
 * binaries and dlopen/FFI callers reach) keeps writing the 0.1 layout. */
#define memtier_config_default(cfg) memtier_config_default_sized((cfg), sizeof(memtier_config_t))

/* memtier_init: creates a context. cfg may be NULL (defaults + environment).
 * On success *ctx_out is a new context; on failure it is set to NULL. Only
 * with gds_mode REQUIRED does init load libcuda and open the cuFile driver;
 * otherwise it never touches CUDA.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx_out, struct_size below 8 or above
 *     65536, a field out of range, a cache_bytes above the memory limit's
 *     share: see memtier_memory_limit)
 *   MEMTIER_ERR_FORMAT (a MEMTIER_* environment value does not parse or is
 *     outside its range)
 *   MEMTIER_ERR_NOMEM (allocation failed)
 *   MEMTIER_ERR_UNSUPPORTED (gds_mode REQUIRED and GDS is not usable)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from any thread; contexts are independent (gomaxprocs
 *   > 0 sets the process-wide Go scheduler, the last init wins).
 * Since: 0.1. */
MEMTIER_API int memtier_init(const memtier_config_t* cfg, memtier_ctx_t** ctx_out);

/* memtier_finalize: stops the context: queued async requests complete with
 * MEMTIER_ERR_CLOSED, running ones are waited for, descriptors are closed, the
 * cache is freed and the context's safetensors and dataset handles are closed.
 * Its requests are freed too: a memtier_request_release of one afterwards
 * returns MEMTIER_ERR_CLOSED and does nothing. Later calls with ctx fail with
 * MEMTIER_ERR_CLOSED. Remote requests in flight are interrupted first
 * (memtier_interrupt: their calls fail with MEMTIER_ERR_INTERRUPTED, so a
 * stalled server does not hold finalize for the remote timeouts); then it
 * blocks until in-flight I/O ends.
 * Returns:
 *   MEMTIER_OK (also for finalize(NULL), a no-op)
 *   MEMTIER_ERR_CLOSED (a second finalize, or an unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from any thread; calls on ctx running at the same
 *   time finish first, later ones fail with MEMTIER_ERR_CLOSED.
 * Since: 0.1. */
MEMTIER_API int memtier_finalize(memtier_ctx_t* ctx);

/* memtier_get_config: the effective configuration of ctx (after defaults and
 * environment). Writes min(cfg_size, sizeof(memtier_config_t)) bytes of cfg
 * (the output growth rule); struct_size in it is the library's size.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx or cfg)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context.
 * Since: 0.1. */
MEMTIER_API int memtier_get_config(memtier_ctx_t* ctx, memtier_config_t* cfg, size_t cfg_size);

/* memtier_memory_limit: the memory limit that bounded ctx's DRAM cache budget,
 * read once by memtier_init (a limit changed later is not seen): the smallest
 * of the host's RAM and the memory cgroup limits of the process (cgroup v2
 * memory.max and memory.high, v1 memory.limit_in_bytes, of its cgroup and of
 * each ancestor). The default cache_bytes is at most 25% of a cgroup limit;
 * an explicit one above that share, or above the host's RAM, fails
 * memtier_init. *bytes_out gets the limit in bytes (0: none known). source
 * gets where it came from, e.g. "cgroup v2 memory.max at /sys/fs/cgroup/job"
 * or "host RAM" ("" when none is known), NUL-terminated and cut to fit
 * source_len bytes, the NUL included (the text is at most a path plus 40
 * bytes; 4096 + 64 always fits). bytes_out or source may be NULL to skip
 * that output (source_len is then ignored).
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx; source not NULL with source_len 0)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context.
 * Since: after 0.3. */
MEMTIER_API int memtier_memory_limit(memtier_ctx_t* ctx, uint64_t* bytes_out, char* source,
                                     size_t source_len);

/* ===================================================================== */
/* Reads                                                                  */
/* ===================================================================== */

/* memtier_read: reads exactly size bytes of path starting at byte offset into dst.
 * target: MEMTIER_TARGET_CPU (dst is host memory of at least size bytes) or
 * MEMTIER_TARGET_CUDA (dst is CUDA device memory, e.g. from cuMemAlloc or a
 * CUDA tensor's data pointer, of at least size bytes inside one allocation;
 * a host pointer gives MEMTIER_ERR_INVALID_ARG). No alignment is required of
 * offset, size or dst. A CUDA read copies bytes in the HBM cache device to
 * device, bytes in the DRAM cache host to device from cache memory, and reads
 * the rest with GPUDirect Storage or through pinned staging buffers (see
 * MEMTIER_GDS_*); it never fills the DRAM cache. When it returns, the bytes
 * are on the device (no stream of the caller's is involved).
 * size 0 succeeds without touching dst (dst may be NULL then).
 * path may also be a URL (preview, CPU target; every call that takes a path
 * takes them too: readv elements, read_async, prefetch(_async), explain,
 * load_tensor, load_chunks(_async), safetensors_open, dataset_open(_tar); the
 * CUDA target answers MEMTIER_ERR_UNSUPPORTED): s3://bucket/key (SigV4 with
 * the AWS CLI's credentials: the AWS_* environment, read when a context reads
 * its first URL, else AWS_PROFILE's shared files; AWS_ENDPOINT_URL for
 * S3-compatible servers, path-style)
 * or http(s)://host/path, read with ranged GETs in parallel parts pinned to
 * the object's ETag; remote bytes fill the DRAM cache like local ones, and
 * freshness STRICT revalidates the object (one conditional GET) per call.
 * Blocks until done; large reads are split into tasks run in parallel.
 * Returns:
 *   MEMTIER_OK (all size bytes were written to dst)
 *   MEMTIER_ERR_EOF (offset + size is past end of file; dst is then not
 *     written beyond what the file holds, its content in the range unspecified)
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx or path, NULL dst with size > 0,
 *     offset + size above 2^63 - 1, a host size above 2^47 (128 TiB, more
 *     than a user address space holds), unknown target, a host dst for CUDA)
 *   MEMTIER_ERR_NOT_FOUND (no such file or object)
 *   MEMTIER_ERR_PERMISSION (open refused: EACCES/EPERM; HTTP 401/403)
 *   MEMTIER_ERR_IS_DIR (path is a directory)
 *   MEMTIER_ERR_NOT_REGULAR (device, FIFO, socket, procfs/sysfs file)
 *   MEMTIER_ERR_IO (any other I/O error; also EFAULT: dst is not writable
 *     memory of size bytes; a failed CUDA copy or cuFile read)
 *   MEMTIER_ERR_DIRECT_IO (direct_mode REQUIRED and O_DIRECT refused)
 *   MEMTIER_ERR_UNSUPPORTED (CUDA target without a usable libcuda, or a URL
 *     with the CUDA target; memtier_last_error says why)
 *   MEMTIER_ERR_NOMEM (also: device memory or pinned staging memory exhausted)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context.
 * Since: 0.1. */
MEMTIER_API int memtier_read(memtier_ctx_t* ctx, const char* path, uint64_t offset,
                             uint64_t size, void* dst, int target);

/* memtier_read_ex: memtier_read with per-call hints (MEMTIER_READ_* flags).
 * Returns:
 *   MEMTIER_OK, and the statuses of memtier_read
 *   MEMTIER_ERR_INVALID_ARG (also: unknown flag bits)
 * Thread safety: safe from many threads on one context.
 * Since: 0.1. */
MEMTIER_API int memtier_read_ex(memtier_ctx_t* ctx, const char* path, uint64_t offset,
                                uint64_t size, void* dst, int target, uint32_t flags);

/* One element of a vectored read. */
typedef struct memtier_iovec {
    uint64_t offset;   /* in: byte offset in the file                          */
    uint64_t size;     /* in: bytes to read                                    */
    void* dst;         /* in: destination of size bytes (NULL allowed if 0)    */
    const char* path;  /* in: file of this element, NULL = memtier_readv's path*/
    int64_t result;    /* out: bytes read (== size) or a negative status       */
} memtier_iovec_t;

/* memtier_readv: a batch of n (offset, size, dst) reads, typically many small
 * ones. Elements are sorted by (file, offset); adjacent or overlapping ranges are
 * coalesced into one read (gaps are never filled: no read amplification beyond a
 * cache block) and served in parallel. Each element gets its own result; one bad
 * element does not affect the others. path may be NULL if every element has one.
 * With MEMTIER_TARGET_CUDA every dst is device memory and elements are read one
 * by one, io_threads at a time (no coalescing: a device range cannot be
 * scattered from one host read). With the DRAM cache off, a CPU call of 16 or
 * more elements, all of path and of one size that the policy reads buffered, is
 * read with one preadv2(RWF_NOWAIT) per element straight into its dst (no
 * coalescing: coalesced_reads counts each element), on the calling thread and,
 * from 64 elements, one resident library thread; elements that read would not
 * serve whole (past the end, not in the page cache, a bad dst) take the path
 * above, and readv_uring_* count only that path. n = 0 succeeds at once.
 * Returns:
 *   MEMTIER_OK (every element succeeded)
 *   the status of the failed element with the lowest index (a status of
 *     memtier_read; its result field holds it too)
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx, NULL iov with n > 0, n above 2^24:
 *     then no element is touched)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context; iov belongs to the
 *   call until it returns.
 * Since: 0.1. */
MEMTIER_API int memtier_readv(memtier_ctx_t* ctx, const char* path, memtier_iovec_t* iov,
                              size_t n, int target);

/* memtier_readv_ex: memtier_readv with per-call hints for every element
 * (MEMTIER_READ_*; today MEMTIER_READ_IMMUTABLE is the one readv uses: no
 * freshness syscall for files already open).
 * Returns:
 *   MEMTIER_OK, and the statuses of memtier_readv
 *   MEMTIER_ERR_INVALID_ARG (also: unknown flag bits, given to every element)
 * Thread safety: as memtier_readv.
 * Since: 0.3. */
MEMTIER_API int memtier_readv_ex(memtier_ctx_t* ctx, const char* path, memtier_iovec_t* iov,
                                 size_t n, int target, uint32_t flags);

/* ===================================================================== */
/* Prefetch and asynchronous requests                                    */
/* ===================================================================== */

/* Prefetch destinations (memtier_prefetch_opts_t.flags). */
#define MEMTIER_PREFETCH_TO_DRAM 0u /* into the DRAM cache (default)           */
#define MEMTIER_PREFETCH_TO_HBM 1u  /* into the HBM cache (device memory of    */
                                    /* hbm_device, budget hbm_cache_bytes);    */
                                    /* MEMTIER_ERR_UNSUPPORTED without a usable*/
                                    /* CUDA backend or with the tier off       */

typedef struct memtier_prefetch_opts {
    uint32_t struct_size; /* sizeof(memtier_prefetch_opts_t)             */
    uint32_t flags;       /* MEMTIER_PREFETCH_*                           */
} memtier_prefetch_opts_t;

/* memtier_prefetch: reads [offset, offset + size) of path into the DRAM cache and
 * returns when it is resident. A range past end of file is clipped to the file.
 * size 0 means "to end of file". Ranges larger than the cache budget keep the
 * last budget's worth. opts may be NULL.
 * With MEMTIER_PREFETCH_TO_HBM (or MEMTIER_PREFETCH_TO_HBM=1 in the environment
 * for every prefetch) the range goes into the HBM cache instead, in whole 2 MiB
 * blocks (the DRAM cache is not needed); later MEMTIER_TARGET_CUDA reads of it
 * on the same device are device-to-device copies (stats hbm_hit_*). CPU reads
 * never use the HBM cache. A file that changes is re-read, never served stale.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx or path, opts->struct_size below 8,
 *     unknown opts->flags bits)
 *   MEMTIER_ERR_UNSUPPORTED (the DRAM cache is off; TO_HBM without a usable
 *     CUDA backend or with the HBM tier off)
 *   MEMTIER_ERR_NOT_FOUND, MEMTIER_ERR_PERMISSION, MEMTIER_ERR_IS_DIR,
 *     MEMTIER_ERR_NOT_REGULAR, MEMTIER_ERR_IO, MEMTIER_ERR_DIRECT_IO,
 *     MEMTIER_ERR_NOMEM (the open and read errors of memtier_read; a range
 *     past end of file is clipped, never MEMTIER_ERR_EOF)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context.
 * Since: 0.1. */
MEMTIER_API int memtier_prefetch(memtier_ctx_t* ctx, const char* path, uint64_t offset,
                                 uint64_t size, const memtier_prefetch_opts_t* opts);

/* memtier_prefetch_async: memtier_prefetch that returns at once with a request
 * in *req_out (NULL on failure). Argument errors are returned directly; I/O
 * errors are reported by memtier_request_wait. Release the request with
 * memtier_request_release.
 * Returns:
 *   MEMTIER_OK (the request is queued)
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx, path or req_out, a bad opts)
 *   MEMTIER_ERR_UNSUPPORTED (as memtier_prefetch, when known at once)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context.
 * Since: 0.1. */
MEMTIER_API int memtier_prefetch_async(memtier_ctx_t* ctx, const char* path, uint64_t offset,
                                       uint64_t size, const memtier_prefetch_opts_t* opts,
                                       memtier_request_t** req_out);

/* memtier_read_async: memtier_read_ex that returns at once with a request in
 * *req_out (NULL on failure). dst must stay valid until the request completes.
 * Argument errors are returned directly; I/O errors are reported by
 * memtier_request_wait. Release the request with memtier_request_release.
 * Returns:
 *   MEMTIER_OK (the request is queued)
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx, path or req_out, NULL dst with
 *     size > 0, size above 2^47; for the CPU target also unknown flag bits and
 *     offset + size above 2^63 - 1: other read errors come from
 *     memtier_request_wait)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context.
 * Since: 0.1. */
MEMTIER_API int memtier_read_async(memtier_ctx_t* ctx, const char* path, uint64_t offset,
                                   uint64_t size, void* dst, int target, uint32_t flags,
                                   memtier_request_t** req_out);

/* memtier_request_wait: waits up to timeout_ns nanoseconds (negative = forever,
 * 0 = do not wait) for req. On completion, if nbytes_out is not NULL, stores
 * the bytes the request moved there.
 * Returns:
 *   the request's own status on completion (MEMTIER_OK or a status of the
 *     call it stands for)
 *   MEMTIER_ERR_TIMEOUT (still running after timeout_ns)
 *   MEMTIER_ERR_INVALID_ARG (NULL req)
 *   MEMTIER_ERR_CLOSED (req released or unknown, or its context finalized;
 *     also the request's status when finalize cancelled it before it ran)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one request.
 * Since: 0.1. */
MEMTIER_API int memtier_request_wait(memtier_request_t* req, int64_t timeout_ns,
                                     uint64_t* nbytes_out);

/* memtier_request_test: memtier_request_wait with timeout 0, where a running
 * request gives MEMTIER_ERR_BUSY (no memtier_last_error text).
 * Returns:
 *   the request's own status on completion
 *   MEMTIER_ERR_BUSY (still running)
 *   MEMTIER_ERR_INVALID_ARG (NULL req)
 *   MEMTIER_ERR_CLOSED (req released or unknown)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one request.
 * Since: 0.1. */
MEMTIER_API int memtier_request_test(memtier_request_t* req, uint64_t* nbytes_out);

/* memtier_request_release: frees req. A request still running is waited for
 * first (it may write to its dst until then).
 * Returns:
 *   MEMTIER_OK (also for release(NULL))
 *   MEMTIER_ERR_CLOSED (unknown or already released request, including one
 *     that memtier_finalize of its context already freed: finalize waits for
 *     and frees its context's requests, so this CLOSED is harmless)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from any thread; req must not be used by other threads
 *   once release is called.
 * Since: 0.1. */
MEMTIER_API int memtier_request_release(memtier_request_t* req);

/* ===================================================================== */
/* Cache control and path policy                                          */
/* ===================================================================== */

/* memtier_drop_cache: removes path's blocks from the DRAM cache (path NULL: all
 * blocks) and closes its cached descriptors. Blocks being copied out are removed
 * when the copy ends.
 * Returns:
 *   MEMTIER_OK (also when nothing was cached)
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context; reads running at the
 *   same time are served, from the cache or the file.
 * Since: 0.1. */
MEMTIER_API int memtier_drop_cache(memtier_ctx_t* ctx, const char* path);

/* ===================================================================== */
/* Interrupting remote calls                                              */
/* ===================================================================== */

/* memtier_interrupt: stops every remote request (s3://, http://, https://) of
 * ctx in flight when it is called, whichever call or thread started it: each
 * call waiting on them returns MEMTIER_ERR_INTERRUPTED soon after (at once
 * while it waits for response headers, a retry or a connection slot; at the
 * next bytes while a body streams in). Calls started after it returns run
 * normally. Local reads are not interrupted (they do not wait on a server).
 * Bytes a failed call wrote into its destination are unspecified, as on any
 * failure.
 * Returns:
 *   MEMTIER_OK (also when nothing was in flight)
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from any thread; not async-signal-safe (call it from
 *   a thread, not from inside a signal handler).
 * Since: 0.3. */
MEMTIER_API int memtier_interrupt(memtier_ctx_t* ctx);

/* An interrupt check (memtier_set_interrupt_check): returns nonzero to stop
 * the call that invoked it. */
typedef int (*memtier_interrupt_check_fn)(void* arg);

/* memtier_set_interrupt_check: makes check(arg) the interrupt check of ctx
 * (check NULL: none, the default), for the calls made on thread (a
 * pthread_self() value; 0: every thread). While such a call on a URL (a
 * path, or a safetensors or dataset handle opened on one) waits on a server,
 * its thread invokes check(arg) about every 50 ms; a nonzero result
 * interrupts ctx (memtier_interrupt) and the call returns
 * MEMTIER_ERR_INTERRUPTED (also when its work finished meanwhile). Each
 * request such a call waits for runs on a library thread while the calling
 * thread waits and checks (about 60 ns more per call on a URL, nothing for
 * local paths, other threads, or while no check is set). This is how an
 * interpreter whose signal handlers run only on its main thread (Python's
 * Ctrl-C) stops a read stalled on a server: the check runs on the thread
 * that made the call, and only there (Python passes its main thread: a
 * check that entered the interpreter from a daemon thread during its
 * shutdown would end that thread inside the library).
 * check must not call MemTier on ctx (it runs inside a call); it may run
 * code of its own (acquire an interpreter lock, look at a flag).
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from any thread; calls already running keep the check
 *   they started with.
 * Since: 0.3. */
MEMTIER_API int memtier_set_interrupt_check(memtier_ctx_t* ctx, memtier_interrupt_check_fn check,
                                            void* arg, uint64_t thread);

/* The decision the path policy takes for a request (memtier_explain). */
typedef struct memtier_decision {
    int32_t path;              /* MEMTIER_PATH_* for the uncached bytes       */
    int32_t admit;             /* 1 if the read fills the DRAM cache          */
    uint64_t cached_bytes;     /* bytes of the range already in the cache     */
    uint64_t resident_bytes;   /* bytes of the range in the page cache        */
    uint64_t tasks;            /* parallel tasks the read is split into       */
    char reason[256];          /* NUL-terminated one-line explanation         */
} memtier_decision_t;

/* memtier_explain: what memtier_read_ex(ctx, path, offset, size, dst, target,
 * flags) would do now, without reading. Fills *out. Returns MEMTIER_OK or the
 * status the read would fail with before any I/O (argument, open errors, a CUDA
 * target in a CPU build); out->path is MEMTIER_PATH_NONE then, and reason says
 * why when the decision itself refused the request. For MEMTIER_TARGET_CUDA,
 * out->path is MEMTIER_PATH_HBM, _CACHE, _GDS or _STAGED and the reason names
 * the rule (threshold, alignment, GDS fallback remembered for the file, GDS
 * unavailable and why, or not probed yet); dst is not inspected. A CPU target
 * never initialises CUDA. For a URL, the reason also says where the bytes not
 * in the DRAM cache would come from: "; disk cache: N bytes in M blocks;
 * remote GET: K bytes in L blocks" with the disk cache tier on (the blocks
 * its directory holds now, found by name without reading them, and the whole
 * blocks a read would fetch, as disk_cache_hit_* and disk_cache_miss_* count
 * them), or "; remote GET: K bytes (no disk cache)". memtier_explain_sized
 * is the form with a size argument.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx, path or out, or a bad argument of the
 *     read)
 *   MEMTIER_ERR_UNSUPPORTED, the open errors of memtier_read (the status the
 *     read would fail with before any I/O)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context.
 * Since: 0.1. */
MEMTIER_API int memtier_explain(memtier_ctx_t* ctx, const char* path, uint64_t offset,
                                uint64_t size, const void* dst, int target, uint32_t flags,
                                memtier_decision_t* out);

/* memtier_explain_sized: memtier_explain that writes min(out_size, the
 * library's sizeof(memtier_decision_t)) bytes of *out and never past them
 * (the output growth rule); memtier_explain(..., out) is
 * memtier_explain_sized(..., out, sizeof(memtier_decision_t)). A size that
 * ends inside reason gets that prefix of it, not NUL-terminated.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx, path or out, out_size 0, or a bad
 *     argument of the read)
 *   MEMTIER_ERR_UNSUPPORTED, the open errors of memtier_read (the status
 *     the read would fail with before any I/O; *out is written then too)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context.
 * Since: after 0.3 (the release after 0.3.0). */
MEMTIER_API int memtier_explain_sized(memtier_ctx_t* ctx, const char* path, uint64_t offset,
                                      uint64_t size, const void* dst, int target, uint32_t flags,
                                      memtier_decision_t* out, size_t out_size);

/* memtier_path_name: the name of a MEMTIER_PATH_* value: "cache",
 * "buffered", "direct", "gds", "staged", "none", "hbm" or "unknown".
 * Returns:
 *   the name (static storage), never NULL
 * Thread safety: safe from any thread; pure C, so it also works in a forked
 *   child.
 * Since: 0.1. */
MEMTIER_API const char* memtier_path_name(int path);

/* memtier_gpu_info: writes a few NUL-terminated lines "key: value" about the
 * GPU side of ctx into buf (buf_size bytes, truncated to fit): "cuda:" whether
 * the CUDA target is usable and why not (the dlopen or cuInit error), "gds:"
 * the GPUDirect Storage state ("GDS not probed yet", "GDS available: <lib>",
 * "GDS unavailable (<reason>): <why>"), "gds_mode:", "hbm:" (budget, device,
 * resident bytes), "last_gds_fallback:" (path, reason key and error of the
 * latest GDS fallback, or "none"), "build_tags:" and "gds_path:" (the path
 * cuFile reads take: "gpudirect", "compat" for cuFile's compatibility mode,
 * "unavailable" or "not probed"). Loads libcuda once per
 * process to answer; never opens the cuFile driver. memtier_capabilities
 * gives the same facts as bits.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx or buf, buf_size 0)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context.
 * Since: 0.2. */
MEMTIER_API int memtier_gpu_info(memtier_ctx_t* ctx, char* buf, size_t buf_size);

/* Bits of memtier_capabilities: what this library can do in this process
 * with this context, as a machine-readable companion of memtier_gpu_info's
 * text. Bits are never renumbered; new capabilities get new bits. */
#define MEMTIER_CAP_CPU 1        /* MEMTIER_TARGET_CPU reads (always set)      */
#define MEMTIER_CAP_CUDA 2       /* MEMTIER_TARGET_CUDA is usable: libcuda     */
                                 /* loaded and cuInit succeeded                */
#define MEMTIER_CAP_GDS 4        /* GPUDirect Storage is usable: CUDA is, the  */
                                 /* context's gds_mode is not OFF and the      */
                                 /* cuFile driver opened                       */
#define MEMTIER_CAP_IO_URING 8   /* readv reads uncached elements in io_uring  */
                                 /* batches: the kernel accepts io_uring_setup */
                                 /* and MEMTIER_IO_URING is not 0              */
#define MEMTIER_CAP_REMOTE 16    /* s3:// and http(s):// paths (CPU target)    */
#define MEMTIER_CAP_DISK_CACHE 32 /* the disk cache tier for remote reads is   */
                                 /* configured (MEMTIER_DISK_CACHE_DIR set and */
                                 /* its settings valid)                        */
#define MEMTIER_CAP_GDS_COMPAT 64 /* with MEMTIER_CAP_GDS: cuFile runs only in */
                                 /* its compatibility mode (no nvidia-fs, no   */
                                 /* NVMe P2PDMA: POSIX reads and copies inside */
                                 /* cuFile), so gds_mode AUTO reads staged     */

/* memtier_capabilities: stores in *caps_out the MEMTIER_CAP_* bits that hold
 * for ctx now; bits this header does not define are 0. It answers from the
 * same probes memtier_gpu_info and the reads use: it loads libcuda once per
 * process (as memtier_gpu_info does), opens the cuFile driver only when
 * CUDA is usable and gds_mode is not OFF (as the first GDS read would), and
 * sets up and closes one io_uring ring the first time (as readv would).
 * *caps_out is 0 when the call fails.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx or caps_out)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context.
 * Since: after 0.3 (the release after 0.3.0). */
MEMTIER_API int memtier_capabilities(memtier_ctx_t* ctx, uint64_t* caps_out);

/* ===================================================================== */
/* Objects: tensors and chunks                                            */
/* ===================================================================== */

/* memtier_load_tensor: reads one tensor payload (model weights, a checkpoint
 * tensor) of nbytes bytes at byte offset of path into dst. The same as
 * memtier_read_ex with MEMTIER_READ_ONCE when nbytes is at least the cache's
 * admission limit (a checkpoint is read once), else default hints.
 * Returns:
 *   MEMTIER_OK, and the statuses of memtier_read
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx or path, NULL dst with nbytes > 0,
 *     nbytes above 2^63 - 1)
 * Thread safety: safe from many threads on one context.
 * Since: 0.1. */
MEMTIER_API int memtier_load_tensor(memtier_ctx_t* ctx, const char* path, uint64_t offset,
                                    uint64_t nbytes, void* dst, int target);

/* One object of memtier_load_chunks: a RAG chunk, a KV-cache block, an index
 * block, a tensor. */
typedef struct memtier_chunk {
    uint64_t offset;  /* in: byte offset in the file                         */
    uint64_t size;    /* in: bytes                                           */
    void* dst;        /* in: destination of size bytes (NULL allowed if 0)   */
    int64_t result;   /* out: bytes read (== size) or a negative status      */
} memtier_chunk_t;

/* memtier_load_chunks: reads n chunks of one file, each into its own dst, in
 * one call. Chunks are sorted by offset; adjacent ones are coalesced into one
 * read (up to the task size, one preadv straight into their dsts), larger ones
 * are split into task-size pieces; the reads run in parallel on the context's
 * I/O workers. Chunks are read once (MEMTIER_READ_ONCE): bytes already in
 * the DRAM cache are copied from it, the rest goes straight into the dsts and
 * is not admitted (use memtier_prefetch or memtier_readv to keep hot chunks
 * cached). Each chunk gets its own result; one bad chunk (past
 * EOF, NULL dst) does not affect the others. Nothing is staged beyond the
 * bounded in-flight memory (max_inflight_mib): the bytes go straight into the
 * callers' buffers. Overlapping chunks are allowed (each gets its bytes).
 * With MEMTIER_TARGET_CUDA every dst is device memory; the file is opened once
 * and each chunk is read on its own (see memtier_read), io_threads at a time.
 * Returns:
 *   MEMTIER_OK (every chunk succeeded, or n = 0)
 *   the status of the failed chunk with the lowest index (a status of
 *     memtier_read; its result field holds it too)
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx or path, NULL chunks with n > 0, n
 *     above 2^24: then no chunk is touched)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context; chunks belongs to
 *   the call until it returns.
 * Since: 0.1. */
MEMTIER_API int memtier_load_chunks(memtier_ctx_t* ctx, const char* path, memtier_chunk_t* chunks,
                                    size_t n, int target);

/* memtier_load_chunks_async: the streaming form of memtier_load_chunks. It
 * returns at once with a request in *req_out (NULL on failure); the chunks
 * array and every dst must stay valid until the request completes. Take
 * finished chunks, in the order they finish, with memtier_request_next: a
 * caller can work on chunk i while later ones are still being read.
 * memtier_request_wait waits for all of them (its status is
 * memtier_load_chunks's; nbytes counts successful bytes). Release the request
 * with memtier_request_release.
 * Returns:
 *   MEMTIER_OK (the request is queued)
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx, path or req_out, NULL chunks with
 *     n > 0, n above 2^24)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context.
 * Since: 0.1. */
MEMTIER_API int memtier_load_chunks_async(memtier_ctx_t* ctx, const char* path,
                                          memtier_chunk_t* chunks, size_t n, int target,
                                          memtier_request_t** req_out);

/* memtier_request_next: waits up to timeout_ns nanoseconds (negative = forever,
 * 0 = do not wait) for a chunk of a memtier_load_chunks_async request that has
 * not been reported yet, and stores its index in *index_out; that chunk's result
 * field is then final and its dst filled. Each chunk is reported exactly once.
 * None of its statuses is counted in stats.errors.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_EOF (every chunk has been reported)
 *   MEMTIER_ERR_TIMEOUT (none finished in time)
 *   MEMTIER_ERR_INVALID_ARG (NULL req or index_out, a request that is not a
 *     chunk request)
 *   MEMTIER_ERR_CLOSED (released or unknown request)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: meant for one consumer at a time per request; concurrent
 *   callers never get the same index.
 * Since: 0.1. */
MEMTIER_API int memtier_request_next(memtier_request_t* req, int64_t timeout_ns, size_t* index_out);

/* ===================================================================== */
/* safetensors files                                                      */
/* ===================================================================== */

/* The format is the one published by Hugging Face's safetensors project: an
 * 8-byte little-endian header length N, N bytes of JSON header: an object,
 * after optional JSON white space as safetensors 0.8 allows
 * ({"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}, ...,
 * optional "__metadata__": {string: string}}), then the data section, with b
 * and e relative to its first byte. memtier_safetensors_open validates all of
 * it before returning and rejects with MEMTIER_ERR_FORMAT and a message in
 * memtier_last_error: file shorter than 8 bytes, N over 100,000,000 or past the
 * file, invalid UTF-8 or JSON, a header that is not an object, unknown dtype,
 * a negative or overflowing shape, shape x dtype bits that is not a whole
 * number of bytes or != e - b (the packed sub-byte dtypes F4, F6_E2M3 and
 * F6_E3M2 count 4 and 6 bits an element, dtype_bits), ranges past the end,
 * overlapping ranges, gaps between tensors, duplicate names, metadata that is
 * not string to string, and a file length other than 8 + N + data. Zero-element
 * tensors and files with only metadata are valid. Known dtypes: BOOL, U8, I8,
 * F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, I16, U16, F16, BF16,
 * I32, U32, F32, C64, I64, U64, F64, F4, F6_E2M3, F6_E3M2. */
typedef struct memtier_safetensors memtier_safetensors_t;

/* One tensor of an open safetensors file. Pointers stay valid until the file
 * is closed. */
typedef struct memtier_tensor_info {
    const char* name;      /* NUL-terminated UTF-8 name                     */
    uint64_t name_len;     /* bytes of name (a name may hold a NUL, \u0000)  */
    const char* dtype;     /* the spec's dtype string, e.g. "BF16"          */
    uint32_t dtype_bits;   /* bits per element (1 byte = 8; BOOL = 8)       */
    uint32_t ndim;         /* entries in shape (0 for a scalar)             */
    const int64_t* shape;  /* ndim dimensions, outermost first              */
    uint64_t offset;       /* absolute byte offset of the payload in file   */
    uint64_t nbytes;       /* payload bytes (0 for zero-element tensors)    */
} memtier_tensor_info_t;

/* memtier_safetensors_open: opens and validates path (see above) and returns a
 * handle in *st_out (NULL on failure). Tensors are listed in data-offset order.
 * The handle remembers the file's identity: a load after the file changed
 * fails with MEMTIER_ERR_IO "changed since open" instead of returning bytes of
 * another file.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_FORMAT (the file is not valid safetensors; see above)
 *   MEMTIER_ERR_NOT_FOUND, MEMTIER_ERR_PERMISSION, MEMTIER_ERR_IS_DIR,
 *     MEMTIER_ERR_NOT_REGULAR, MEMTIER_ERR_IO (the open errors of
 *     memtier_read)
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx, path or st_out)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context; the handle may be
 *   used from many threads at once.
 * Since: 0.1. */
MEMTIER_API int memtier_safetensors_open(memtier_ctx_t* ctx, const char* path,
                                         memtier_safetensors_t** st_out);

/* memtier_safetensors_close: frees st (its info pointers become invalid).
 * memtier_finalize closes the handles of its context: later calls with them,
 * close included, return MEMTIER_ERR_CLOSED.
 * Returns:
 *   MEMTIER_OK (also for close(NULL))
 *   MEMTIER_ERR_CLOSED (a second close, or the context was finalized)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from any thread; st must not be used by other threads
 *   once close is called.
 * Since: 0.1. */
MEMTIER_API int memtier_safetensors_close(memtier_safetensors_t* st);

/* memtier_safetensors_count: stores the number of tensors in *count_out.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL st or count_out)
 *   MEMTIER_ERR_CLOSED (closed or unknown st)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one handle.
 * Since: 0.1. */
MEMTIER_API int memtier_safetensors_count(memtier_safetensors_t* st, size_t* count_out);

/* memtier_safetensors_get: fills *info for tensor index (0 <= index < count);
 * memtier_safetensors_get_sized(st, index, info, sizeof(memtier_tensor_info_t)).
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL st or info, index out of range)
 *   MEMTIER_ERR_CLOSED (closed or unknown st)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one handle.
 * Since: 0.1. */
MEMTIER_API int memtier_safetensors_get(memtier_safetensors_t* st, size_t index,
                                        memtier_tensor_info_t* info);

/* memtier_safetensors_get_sized: memtier_safetensors_get that writes
 * min(info_size, the library's sizeof(memtier_tensor_info_t)) bytes of *info
 * and never past them (the output growth rule); memtier_safetensors_get(st,
 * index, info) is memtier_safetensors_get_sized(st, index, info,
 * sizeof(memtier_tensor_info_t)).
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL st or info, info_size 0, index out of
 *     range)
 *   MEMTIER_ERR_CLOSED (closed or unknown st)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one handle.
 * Since: after 0.3 (the release after 0.3.0). */
MEMTIER_API int memtier_safetensors_get_sized(memtier_safetensors_t* st, size_t index,
                                              memtier_tensor_info_t* info, size_t info_size);

/* memtier_safetensors_find: stores the index of the tensor named name
 * (name_len bytes) in *index_out.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_NOT_FOUND (no tensor has that name)
 *   MEMTIER_ERR_INVALID_ARG (NULL st or index_out, NULL name with name_len > 0)
 *   MEMTIER_ERR_CLOSED (closed or unknown st)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one handle.
 * Since: 0.1. */
MEMTIER_API int memtier_safetensors_find(memtier_safetensors_t* st, const char* name,
                                         size_t name_len, size_t* index_out);

/* memtier_safetensors_metadata: the index-th "__metadata__" entry (sorted by
 * key); *key_out and *value_out are NUL-terminated and valid until close.
 * memtier_safetensors_metadata_count gives the number of entries and whether
 * the header has the object at all.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_EOF (index >= the number of entries, so a loop from 0 ends;
 *     not counted in stats.errors)
 *   MEMTIER_ERR_INVALID_ARG (NULL st, key_out or value_out)
 *   MEMTIER_ERR_CLOSED (closed or unknown st)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one handle.
 * Since: 0.1. */
MEMTIER_API int memtier_safetensors_metadata(memtier_safetensors_t* st, size_t index,
                                             const char** key_out, const char** value_out);

/* memtier_safetensors_metadata_count: tells an empty "__metadata__" from a
 * missing one (the reference safetensors gives {} for "__metadata__": {} and
 * None when the key is absent or null). *count_out gets the number of
 * entries memtier_safetensors_metadata lists (0 for both an empty and a
 * missing object); *present_out, when present_out is not NULL, gets 1 when
 * the header holds a "__metadata__" object (empty or not) and 0 when it has
 * no such key or its value is null.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL st or count_out)
 *   MEMTIER_ERR_CLOSED (closed or unknown st)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one handle.
 * Since: after 0.3 (the release after 0.3.0). */
MEMTIER_API int memtier_safetensors_metadata_count(memtier_safetensors_t* st, size_t* count_out,
                                                   int* present_out);

/* memtier_safetensors_load: reads tensor index's payload into dst, which holds
 * dst_size bytes; dst_size must be at least the tensor's nbytes (nothing is
 * written otherwise). target is as in memtier_read.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL st, index out of range, NULL dst for a
 *     tensor of nbytes > 0, dst_size < nbytes)
 *   MEMTIER_ERR_IO (also: the file changed since open), and the other read
 *     errors of memtier_read
 *   MEMTIER_ERR_UNSUPPORTED (MEMTIER_TARGET_CUDA without a usable libcuda)
 *   MEMTIER_ERR_CLOSED (closed or unknown st)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one handle.
 * Since: 0.1. */
MEMTIER_API int memtier_safetensors_load(memtier_safetensors_t* st, size_t index, void* dst,
                                         uint64_t dst_size, int target);

/* memtier_safetensors_load_all: reads every tensor i whose dsts[i] is not NULL
 * into dsts[i] (nbytes of tensor i), as one memtier_load_chunks call: adjacent
 * tensors are coalesced and read in parallel. dsts has count entries. results,
 * if not NULL, gets count per-tensor results (bytes or a negative status; 0 for
 * skipped ones).
 * Returns:
 *   MEMTIER_OK (every tensor read, or the file has none)
 *   the status of the failed tensor with the lowest index (a read error of
 *     memtier_read)
 *   MEMTIER_ERR_INVALID_ARG (NULL st, NULL dsts for a file with tensors)
 *   MEMTIER_ERR_CLOSED (closed or unknown st)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one handle.
 * Since: 0.1. */
MEMTIER_API int memtier_safetensors_load_all(memtier_safetensors_t* st, void* const* dsts,
                                             int64_t* results, int target);

/* ===================================================================== */
/* Datasets: packed sample files and tar shards                           */
/* ===================================================================== */

/* A dataset is a list of samples (byte ranges of one data file), opened from
 * one of:
 *  - a packed dataset: a data file plus an index file (the MemTier index
 *    format: text lines "offset length", or a .npy int64 array of shape
 *    (n, 2); see README "Dataset index format"), as written by
 *    `python -m memtier.pack`;
 *  - a tar shard (POSIX ustar, GNU long names, pax path records): each
 *    regular-file member is a sample named by its path in the archive, in
 *    archive order. The member index is built once per file version and kept
 *    in memory by the context.
 * Rejects malformed index or tar files with MEMTIER_ERR_FORMAT. Like a
 * safetensors handle, a dataset remembers its data file's identity: a read
 * after the file changed fails with MEMTIER_ERR_IO "changed since open". A
 * remote data file's reads trust the version (ETag) checked at open and send
 * no revalidation GET (see memtier_read): cached samples are that version's
 * bytes, and a read that needs the server after an overwrite fails. */
typedef struct memtier_dataset memtier_dataset_t;

/* memtier_dataset_open: a packed dataset of data_path described by index_path,
 * in *ds_out (NULL on failure).
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_FORMAT (an index that does not parse or has a record past
 *     the data file's end)
 *   MEMTIER_ERR_NOT_FOUND, MEMTIER_ERR_PERMISSION, MEMTIER_ERR_IS_DIR,
 *     MEMTIER_ERR_NOT_REGULAR, MEMTIER_ERR_IO (the open errors of
 *     memtier_read, for either file)
 *   MEMTIER_ERR_NOMEM (allocation failed)
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx, data_path, index_path or ds_out)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context; the handle may be
 *   used from many threads at once.
 * Since: 0.1. */
MEMTIER_API int memtier_dataset_open(memtier_ctx_t* ctx, const char* data_path,
                                     const char* index_path, memtier_dataset_t** ds_out);

/* memtier_dataset_open_tar: a tar shard (see above) in *ds_out (NULL on
 * failure).
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_FORMAT (not a tar archive MemTier reads: malformed or
 *     truncated headers, a compressed shard, which the message names)
 *   MEMTIER_ERR_NOT_FOUND, MEMTIER_ERR_PERMISSION, MEMTIER_ERR_IS_DIR,
 *     MEMTIER_ERR_NOT_REGULAR, MEMTIER_ERR_IO (the open errors of
 *     memtier_read)
 *   MEMTIER_ERR_NOMEM (allocation failed)
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx, tar_path or ds_out)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: as memtier_dataset_open.
 * Since: 0.1. */
MEMTIER_API int memtier_dataset_open_tar(memtier_ctx_t* ctx, const char* tar_path,
                                         memtier_dataset_t** ds_out);

/* memtier_dataset_close: frees ds (its name pointers become invalid).
 * memtier_finalize closes the handles of its context, as for safetensors files.
 * Returns:
 *   MEMTIER_OK (also for close(NULL))
 *   MEMTIER_ERR_CLOSED (a second close, or the context was finalized)
 *   MEMTIER_ERR_INVALID_ARG (ds is a handle of another kind)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from any thread; ds must not be used by other threads
 *   once close is called.
 * Since: 0.1. */
MEMTIER_API int memtier_dataset_close(memtier_dataset_t* ds);

/* memtier_dataset_count: stores the number of samples in *count_out.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL ds or count_out, a handle of another kind)
 *   MEMTIER_ERR_CLOSED (closed or unknown ds)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one handle.
 * Since: 0.1. */
MEMTIER_API int memtier_dataset_count(memtier_dataset_t* ds, uint64_t* count_out);

/* memtier_dataset_sample: the byte range of sample index in the data file
 * (offset_out, size_out may be NULL) and, for tar shards, its member name in
 * *name_out (NUL-terminated, valid until close; "" for packed datasets; may be
 * NULL).
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL ds, index out of range, a handle of
 *     another kind)
 *   MEMTIER_ERR_CLOSED (closed or unknown ds)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one handle.
 * Since: 0.1. */
MEMTIER_API int memtier_dataset_sample(memtier_dataset_t* ds, uint64_t index, uint64_t* offset_out,
                                       uint64_t* size_out, const char** name_out);

/* memtier_dataset_read: reads sample index into dst of dst_size bytes; target
 * is as in memtier_read.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL ds, index out of range, NULL dst for a
 *     non-empty sample, dst_size below the sample's size)
 *   MEMTIER_ERR_IO (also: the data file changed since open), and the other
 *     read errors of memtier_read
 *   MEMTIER_ERR_CLOSED (closed or unknown ds)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one handle.
 * Since: 0.1. */
MEMTIER_API int memtier_dataset_read(memtier_dataset_t* ds, uint64_t index, void* dst,
                                     uint64_t dst_size, int target);

/* memtier_dataset_read_batch: reads samples indices[0..n) into dsts[0..n) (each
 * at least that sample's size) as one vectored read. results[i] gets bytes read
 * or a negative status. n = 0 succeeds at once.
 * Returns:
 *   MEMTIER_OK (every sample read)
 *   the status of the failed sample with the lowest index (an index out of
 *     range is MEMTIER_ERR_INVALID_ARG; a read error of memtier_read)
 *   MEMTIER_ERR_INVALID_ARG (NULL ds; NULL indices, dsts or results with
 *     n > 0; n above 2^24)
 *   MEMTIER_ERR_CLOSED (closed or unknown ds)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one handle.
 * Since: 0.1. */
MEMTIER_API int memtier_dataset_read_batch(memtier_dataset_t* ds, const uint64_t* indices,
                                           size_t n, void* const* dsts, int64_t* results,
                                           int target);

/* memtier_pread_batch: reads n byte ranges of already open file descriptors
 * into caller memory in one call, in C only: it never enters the Go runtime,
 * needs no context and, unlike every other call, works in a process forked
 * after the library was loaded (where the others return MEMTIER_ERR_FORKED).
 * It is how a forked DataLoader worker reads a batch (Python's
 * MemTierDataset and TarShardDataset); it has no cache, no O_DIRECT and no
 * statistics: plain pread/preadv of the page cache.
 * Parameters:
 *   fds[i]     in: an open, readable descriptor (the caller owns it)
 *   offsets[i] in: the byte offset of range i in fds[i] (at most INT64_MAX)
 *   sizes[i]   in: its length in bytes (at most SSIZE_MAX); 0 reads nothing
 *   dsts[i]    in: where its sizes[i] bytes go (NULL only when sizes[i] is 0);
 *              used only during the call
 *   n          the number of ranges; 0 returns MEMTIER_OK
 *   results[i] out (required when n > 0): sizes[i] when range i was read in
 *              full, else its negative status (below)
 * Ranges whose file bytes follow each other on one descriptor are read with
 * one preadv. EINTR is retried. A failed call returns the status of the
 * lowest-index range that failed, whose detail memtier_last_error gives
 * (element, descriptor, offset, size, errno text). Like memtier_readv
 * (cached, with a context), but for a forked process.
 * Returns:
 *   MEMTIER_OK (every range read in full; also for n == 0)
 *   MEMTIER_ERR_INVALID_ARG (a NULL array with n > 0, a NULL dst, a size or
 *                            offset out of range, a bad descriptor: EBADF,
 *                            EINVAL, EFAULT, ESPIPE)
 *   MEMTIER_ERR_EOF (the file ends inside the range)
 *   MEMTIER_ERR_IS_DIR (a directory's descriptor)
 *   MEMTIER_ERR_NOMEM (ENOMEM)
 *   MEMTIER_ERR_IO (any other read error)
 * Thread safety: safe from many threads at once (positional reads; no shared
 * state). Blocks until every range is read or has failed.
 * Since: after 0.3 (the release after 0.3.0). */
MEMTIER_API int memtier_pread_batch(const int32_t* fds, const uint64_t* offsets,
                                    const uint64_t* sizes, void* const* dsts, size_t n,
                                    int64_t* results);

/* ===================================================================== */
/* Statistics                                                            */
/* ===================================================================== */

/* memtier_stats_t: counters since init or the last memtier_stats_reset. Bytes are
 * bytes. requests counts every memtier_read/_ex/_async call, readv element and
 * chunk (memtier_load_chunks, tensor and sample loads) that reached the engine,
 * failed ones included; bytes counts what successful ones
 * delivered. A read served partly from the cache counts under each path for the
 * bytes that path moved. errors counts every failed call on the context. */
typedef struct memtier_stats {
    uint64_t requests;              /* read requests (read, readv element, async) */
    uint64_t bytes;                 /* bytes delivered to callers                 */
    uint64_t cache_hit_requests;    /* requests served entirely from the cache    */
    uint64_t cache_hit_bytes;       /* bytes copied out of the cache              */
    uint64_t buffered_requests;     /* requests that used buffered pread          */
    uint64_t buffered_bytes;        /* bytes read with buffered pread             */
    uint64_t direct_requests;       /* requests that used O_DIRECT                */
    uint64_t direct_bytes;          /* bytes read with O_DIRECT                   */
    uint64_t gds_requests;          /* CUDA reads that used GPUDirect Storage     */
    uint64_t gds_bytes;             /* bytes read with GPUDirect Storage          */
    uint64_t staged_requests;       /* CUDA reads staged through pinned host      */
                                    /* buffers (then copied host to device)       */
    uint64_t staged_bytes;          /* bytes read on the staged path              */
    uint64_t cache_hits;            /* cache block lookups found resident         */
    uint64_t cache_misses;          /* cache block lookups not resident           */
    uint64_t cache_evictions;       /* blocks evicted to stay within budget       */
    uint64_t cache_resident_bytes;  /* bytes held by cache blocks now             */
    uint64_t cache_budget_bytes;    /* the configured budget                      */
    uint64_t cache_inserted_bytes;  /* bytes written into the cache               */
    uint64_t prefetch_requests;     /* prefetch calls (sync and async)            */
    uint64_t prefetch_bytes;        /* bytes those prefetches brought in          */
    uint64_t readv_calls;           /* memtier_readv calls                        */
    uint64_t coalesced_reads;       /* reads after readv/load_chunks coalescing   */
    uint64_t storage_bytes;         /* bytes read from files (all paths)          */
    uint64_t direct_fallbacks;      /* O_DIRECT refused, buffered used instead    */
    uint64_t bounce_bytes;          /* O_DIRECT bytes moved via bounce buffers    */
    uint64_t eintr_retries;         /* preads retried after EINTR                 */
    uint64_t short_read_retries;    /* preads continued after a short count       */
    uint64_t async_requests;        /* read, prefetch, load_chunks _async calls   */
    uint64_t errors;                /* calls that returned an error               */
    uint64_t files_opened;          /* descriptors opened                         */
    uint64_t files_evicted;         /* descriptors closed to respect the bound    */
    uint64_t stale_invalidations;   /* cached files found changed (re-read)       */
    /* Added in 0.2: the GPU tier (target CUDA, prefetch TO_HBM). A CUDA read
     * counts gds_* / staged_* for the bytes read from the file, cache_hit_*
     * for bytes copied from the DRAM cache and hbm_hit_* for bytes copied from
     * the HBM cache (never buffered_* / direct_*, which count CPU reads). */
    uint64_t hbm_hit_requests;      /* CUDA reads served entirely from HBM cache  */
    uint64_t hbm_hit_bytes;         /* bytes copied device to device from the HBM */
                                    /* cache                                      */
    uint64_t hbm_inserted_bytes;    /* bytes written into the HBM cache           */
    uint64_t hbm_evictions;         /* HBM blocks evicted to stay within budget   */
    uint64_t hbm_resident_bytes;    /* bytes held by HBM cache blocks now         */
    uint64_t hbm_budget_bytes;      /* configured HBM budget (0: tier off)        */
    uint64_t gds_fallbacks;         /* GDS attempts that failed and were served   */
                                    /* staged instead (memtier_gpu_info: why)     */
    uint64_t h2d_bytes;             /* bytes copied host to device (staged reads, */
                                    /* DRAM-cache hits, HBM fills)                */
    uint64_t h2d_ns;                /* nanoseconds of those copies, file reads of */
                                    /* the staged pipeline included: delivered    */
                                    /* bandwidth = h2d_bytes / h2d_ns (GB/s)      */
    uint64_t staged_read_ns;        /* nanoseconds the staged path spent reading  */
                                    /* the file into pinned buffers, summed over  */
                                    /* the staging lanes a large read runs on at  */
                                    /* once (the rest of a lane's time is waiting */
                                    /* for its copies to the device)              */
    /* Added in 0.3 (memtier_stats_sized with this header's size). */
    uint64_t revalidations;         /* freshness checks of files already open     */
                                    /* (fstat or path stat; see FRESHNESS_*)       */
    uint64_t readv_inline_hits;     /* readv elements copied from the DRAM cache  */
                                    /* on the caller's thread (no worker hand-off)*/
    /* Added after 0.3 (memtier_stats_sized with this header's size): readv's
     * io_uring batches. A readv reads the elements that come straight from
     * the file on the buffered path (not held by the DRAM cache, not
     * admitted to it) with one io_uring_enter per 256 of them. */
    uint64_t readv_uring_batches;   /* io_uring submissions of readv elements     */
    uint64_t readv_uring_reads;     /* coalesced readv ranges read through those  */
                                    /* submissions                                */
    uint64_t readv_uring_fallback_off;         /* readv calls that read such  */
                                    /* elements one preadv2 each because      */
                                    /* MEMTIER_IO_URING=0                     */
    uint64_t readv_uring_fallback_unavailable; /* readv calls that read such  */
                                    /* elements one preadv2 each because the  */
                                    /* kernel refused io_uring (not built in, */
                                    /* kernel.io_uring_disabled, seccomp)     */
    /* Added after 0.3 (memtier_stats_sized with this header's size): remote
     * objects (s3://, http(s)://) and the disk cache tier in front of them
     * (MEMTIER_DISK_CACHE_DIR). All are per context, 0 until the context
     * reads its first URL: remote_* count the GETs of the context's own
     * remote client (its connection pool, made on that first URL), and
     * disk_cache_* count what the context's reads found in, fetched for and
     * wrote to the directory. The directory and its byte budget are shared
     * by every context and process that names it; what the others do there
     * is counted in their stats, not here. A block is counted once per
     * request that needs it. Bytes the DRAM cache serves never reach these
     * tiers (freshness STRICT still sends its revalidation GET). */
    uint64_t remote_requests;       /* GETs sent: the open's (and each        */
                                    /* freshness revalidation's) and one per  */
                                    /* ranged part; a retried GET counts each */
                                    /* attempt                                */
    uint64_t remote_bytes;          /* body bytes received from remote servers*/
    uint64_t remote_retries;        /* GET attempts after a failed one        */
    uint64_t remote_throttles;      /* 503 (SlowDown) and 429 answers; the    */
                                    /* client then lowers its concurrency     */
    uint64_t disk_cache_hit_blocks; /* blocks served from the disk cache      */
    uint64_t disk_cache_hit_bytes;  /* bytes of requests served from those    */
                                    /* blocks (the requested part of each)    */
    uint64_t disk_cache_miss_blocks; /* blocks not on disk (or corrupt),      */
                                    /* fetched remotely whole                 */
    uint64_t disk_cache_miss_bytes; /* bytes fetched for the missed blocks    */
                                    /* (whole blocks)                         */
    uint64_t disk_cache_written_bytes; /* bytes of the entries written to the */
                                    /* directory, headers included (4 KiB an  */
                                    /* entry for URLs under about 4000 bytes) */
    uint64_t disk_cache_evicted_bytes; /* bytes of entries this context       */
                                    /* removed to keep the directory within   */
                                    /* its budget (oldest used first)         */
    uint64_t disk_cache_corrupt_entries; /* torn, truncated or corrupt        */
                                    /* entries found on read: deleted,        */
                                    /* refetched, never served                */
    uint64_t disk_cache_inline_writes; /* blocks a reader wrote itself        */
                                    /* (larger than the whole write-behind    */
                                    /* queue)                                 */
    uint64_t disk_cache_queue_waits; /* blocks whose reader waited for room   */
                                    /* in the write-behind queue, or for one  */
                                    /* of the write-through slots             */
                                    /* (back-pressure; since after 0.3)       */
    uint64_t disk_cache_queue_drops; /* of those, blocks left uncached: no    */
                                    /* room or slot within the wait (2 s)     */
    uint64_t disk_cache_trusted_pieces; /* 64 KiB pieces served without their */
                                    /* checksum: this context checked them    */
                                    /* earlier, the entry is unchanged and in */
                                    /* the page cache (trust; since after     */
                                    /* 0.3)                                   */
    uint64_t disk_cache_trust_fallbacks; /* reads of trusted pieces that were */
                                    /* checked instead: the entry changed or  */
                                    /* a page was not in the page cache       */
} memtier_stats_t;

/* memtier_stats: fills the whole of *st (the layout above, never reading it
 * first: st may be uninitialised); see the macro below for which layout.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx or st)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context; counters are read
 *   without stopping I/O, so fields may come from slightly different moments.
 * Since: 0.1. */
MEMTIER_API int memtier_stats(memtier_ctx_t* ctx, memtier_stats_t* st);

/* memtier_stats_sized: memtier_stats that writes min(st_size, the library's
 * stats size) bytes of *st (the output growth rule): pass
 * sizeof(memtier_stats_t) to read the fields of this header.
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx or st)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: as memtier_stats.
 * Since: 0.1. */
MEMTIER_API int memtier_stats_sized(memtier_ctx_t* ctx, memtier_stats_t* st, size_t st_size);

/* Code compiled against this header fills every field of its memtier_stats_t:
 * memtier_stats(ctx, st) is memtier_stats_sized(ctx, st,
 * sizeof(memtier_stats_t)). The exported function of that name (what older
 * binaries and dlopen/FFI callers reach) keeps writing the 0.1 layout (the
 * fields up to stale_invalidations), so it never writes past an older struct. */
#define memtier_stats(ctx, st) memtier_stats_sized((ctx), (st), sizeof(memtier_stats_t))

/* memtier_stats_reset: sets every counter to 0 except cache_resident_bytes,
 * cache_budget_bytes, hbm_resident_bytes and hbm_budget_bytes, which describe
 * state. The remote_* and disk_cache_* counters restart from 0 as well (the
 * tiers' own totals are kept and the values at the reset subtracted).
 * Returns:
 *   MEMTIER_OK
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 *   MEMTIER_ERR_FORKED (called in a forked child)
 * Thread safety: safe from many threads on one context; a read running at
 *   the same time may count before or after the reset.
 * Since: 0.1. */
MEMTIER_API int memtier_stats_reset(memtier_ctx_t* ctx);

/* ===================================================================== */
/* End of the stable API. Testing hooks (not for production use)          */
/* ===================================================================== */

/* Declared only for code that defines MEMTIER_TESTING_API before including
 * this header (MemTier's own tests). The symbols are always exported, but
 * they carry no stability promise: they may change or go in any release. */
#ifdef MEMTIER_TESTING_API

#define MEMTIER_DEBUG_PANIC_EXPORT 1 /* the call itself panics               */
#define MEMTIER_DEBUG_PANIC_WORKER 2 /* the next read's worker panics         */

/* memtier_debug_hook: triggers a test fault to prove panics become
 * MEMTIER_ERR_INTERNAL. Works only when the process started with
 * MEMTIER_TEST_HOOKS=1.
 * Returns:
 *   MEMTIER_OK (MEMTIER_DEBUG_PANIC_WORKER armed)
 *   MEMTIER_ERR_INTERNAL (MEMTIER_DEBUG_PANIC_EXPORT: the recovered panic)
 *   MEMTIER_ERR_UNSUPPORTED (test hooks are off)
 *   MEMTIER_ERR_INVALID_ARG (NULL ctx, unknown hook)
 *   MEMTIER_ERR_CLOSED (finalized or unknown ctx)
 * Thread safety: safe from many threads on one context.
 * Since: 0.1. */
MEMTIER_API int memtier_debug_hook(memtier_ctx_t* ctx, int hook);

#endif /* MEMTIER_TESTING_API */

#ifdef __cplusplus
}
#endif

#endif /* MEMTIER_H */
