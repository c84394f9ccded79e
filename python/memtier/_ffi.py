"""cffi (ABI mode) binding of libmemtier.so: the cdef and the lazy loader.

Nothing here runs at ``import memtier``: the cdef is parsed and the library is
opened on the first call that needs them, once per process. The Go runtime
inside libmemtier.so starts threads when the library is loaded and does not
survive ``fork()``, so a process must not load it before forking (GO_CSHARED
section 1.1). The loaded handle is keyed by ``os.getpid()``; in a forked child
of a process that loaded it every entry raises :class:`memtier.ForkError`.

Library lookup order (the first that loads wins; every failure is reported):

1. ``$MEMTIER_LIBRARY`` (a path; when set, nothing else is tried);
2. the packaged copy ``memtier/_lib/libmemtier.so``;
3. ``ctypes.util.find_library("memtier")`` (LD_LIBRARY_PATH, ldconfig).
"""

from __future__ import annotations

import os
import threading
from typing import Any, List, Optional, Tuple

from . import _errors

#: Version of this package; equal to MEMTIER_VERSION_STRING of the header it
#: was written against (a test checks).
PACKAGE_VERSION = "0.3.0"
PACKAGE_VERSION_NUMBER = 300  # major * 10000 + minor * 100 + patch

# The cdef is a literal subset of include/memtier.h: the same prototypes and
# struct definitions with comments, MEMTIER_API and preprocessor logic
# removed. tests/python/test_packaging.py parses both and fails when they
# disagree (ABI mode crashes instead of erroring on a wrong declaration).
# Deliberate omissions are listed in EXCLUDED_FUNCTIONS / EXCLUDED_DEFINES.
CDEF = r"""
typedef enum memtier_status {
    MEMTIER_OK = 0,
    MEMTIER_ERR_INVALID_ARG = -1,
    MEMTIER_ERR_NOT_FOUND = -2,
    MEMTIER_ERR_PERMISSION = -3,
    MEMTIER_ERR_EOF = -4,
    MEMTIER_ERR_IO = -5,
    MEMTIER_ERR_NOMEM = -6,
    MEMTIER_ERR_UNSUPPORTED = -7,
    MEMTIER_ERR_CLOSED = -8,
    MEMTIER_ERR_BUSY = -9,
    MEMTIER_ERR_TIMEOUT = -10,
    MEMTIER_ERR_FORMAT = -11,
    MEMTIER_ERR_IS_DIR = -12,
    MEMTIER_ERR_INTERNAL = -13,
    MEMTIER_ERR_FORKED = -14,
    MEMTIER_ERR_DIRECT_IO = -15,
    MEMTIER_ERR_NOT_REGULAR = -16
} memtier_status;

const char* memtier_strerror(int status);
const char* memtier_last_error(void);
const char* memtier_version(void);
int memtier_version_number(void);

#define MEMTIER_VERSION_MAJOR 0
#define MEMTIER_VERSION_MINOR 3
#define MEMTIER_VERSION_PATCH 0

typedef struct memtier_ctx memtier_ctx_t;
typedef struct memtier_request memtier_request_t;

#define MEMTIER_TARGET_CPU 0
#define MEMTIER_TARGET_CUDA 1

#define MEMTIER_READ_DEFAULT 0u
#define MEMTIER_READ_ONCE 1u
#define MEMTIER_READ_WILL_REUSE 2u
#define MEMTIER_READ_DIRECT 4u
#define MEMTIER_READ_BUFFERED 8u
#define MEMTIER_READ_IMMUTABLE 16u

#define MEMTIER_FRESHNESS_STRICT 0
#define MEMTIER_FRESHNESS_INTERVAL 1
#define MEMTIER_FRESHNESS_OPEN 2

#define MEMTIER_DIRECT_AUTO 0
#define MEMTIER_DIRECT_OFF 1
#define MEMTIER_DIRECT_ALWAYS 2
#define MEMTIER_DIRECT_REQUIRED 3

#define MEMTIER_PATH_CACHE 0
#define MEMTIER_PATH_BUFFERED 1
#define MEMTIER_PATH_DIRECT 2
#define MEMTIER_PATH_GDS 3
#define MEMTIER_PATH_STAGED 4
#define MEMTIER_PATH_NONE 5
#define MEMTIER_PATH_HBM 6

#define MEMTIER_GDS_AUTO 0
#define MEMTIER_GDS_OFF 1
#define MEMTIER_GDS_REQUIRED 2

typedef struct memtier_config {
    uint32_t struct_size;
    uint32_t io_threads;
    uint64_t cache_bytes;
    uint64_t cache_block_bytes;
    uint64_t cache_admit_max_bytes;
    uint64_t task_bytes;
    uint64_t direct_threshold_bytes;
    int32_t direct_mode;
    int32_t cache_enabled;
    uint32_t max_open_files;
    uint32_t gomaxprocs;
    uint64_t gds_threshold_bytes;
    uint32_t max_inflight_mib;
    uint32_t small_io_depth;
    int32_t path_recheck_ms;
    uint32_t reserved0;
    uint64_t hbm_cache_bytes;
    int32_t gds_mode;
    int32_t hbm_device;
    int32_t freshness;
    int32_t freshness_interval_ms;
} memtier_config_t;

int memtier_config_default(memtier_config_t* cfg);
int memtier_config_default_sized(memtier_config_t* cfg, size_t cfg_size);
int memtier_init(const memtier_config_t* cfg, memtier_ctx_t** ctx_out);
int memtier_finalize(memtier_ctx_t* ctx);
int memtier_get_config(memtier_ctx_t* ctx, memtier_config_t* cfg, size_t cfg_size);

int memtier_read(memtier_ctx_t* ctx, const char* path, uint64_t offset,
                 uint64_t size, void* dst, int target);
int memtier_read_ex(memtier_ctx_t* ctx, const char* path, uint64_t offset,
                    uint64_t size, void* dst, int target, uint32_t flags);

typedef struct memtier_iovec {
    uint64_t offset;
    uint64_t size;
    void* dst;
    const char* path;
    int64_t result;
} memtier_iovec_t;

int memtier_readv(memtier_ctx_t* ctx, const char* path, memtier_iovec_t* iov,
                  size_t n, int target);
int memtier_readv_ex(memtier_ctx_t* ctx, const char* path, memtier_iovec_t* iov,
                     size_t n, int target, uint32_t flags);

#define MEMTIER_PREFETCH_TO_DRAM 0u
#define MEMTIER_PREFETCH_TO_HBM 1u

typedef struct memtier_prefetch_opts {
    uint32_t struct_size;
    uint32_t flags;
} memtier_prefetch_opts_t;

int memtier_prefetch(memtier_ctx_t* ctx, const char* path, uint64_t offset,
                     uint64_t size, const memtier_prefetch_opts_t* opts);
int memtier_prefetch_async(memtier_ctx_t* ctx, const char* path, uint64_t offset,
                           uint64_t size, const memtier_prefetch_opts_t* opts,
                           memtier_request_t** req_out);
int memtier_read_async(memtier_ctx_t* ctx, const char* path, uint64_t offset,
                       uint64_t size, void* dst, int target, uint32_t flags,
                       memtier_request_t** req_out);
int memtier_request_wait(memtier_request_t* req, int64_t timeout_ns,
                         uint64_t* nbytes_out);
int memtier_request_test(memtier_request_t* req, uint64_t* nbytes_out);
int memtier_request_release(memtier_request_t* req);

int memtier_drop_cache(memtier_ctx_t* ctx, const char* path);

typedef struct memtier_decision {
    int32_t path;
    int32_t admit;
    uint64_t cached_bytes;
    uint64_t resident_bytes;
    uint64_t tasks;
    char reason[256];
} memtier_decision_t;

int memtier_explain(memtier_ctx_t* ctx, const char* path, uint64_t offset,
                    uint64_t size, const void* dst, int target, uint32_t flags,
                    memtier_decision_t* out);
const char* memtier_path_name(int path);
int memtier_gpu_info(memtier_ctx_t* ctx, char* buf, size_t buf_size);

int memtier_load_tensor(memtier_ctx_t* ctx, const char* path, uint64_t offset,
                        uint64_t nbytes, void* dst, int target);

typedef struct memtier_chunk {
    uint64_t offset;
    uint64_t size;
    void* dst;
    int64_t result;
} memtier_chunk_t;

int memtier_load_chunks(memtier_ctx_t* ctx, const char* path, memtier_chunk_t* chunks,
                        size_t n, int target);
int memtier_load_chunks_async(memtier_ctx_t* ctx, const char* path,
                              memtier_chunk_t* chunks, size_t n, int target,
                              memtier_request_t** req_out);
int memtier_request_next(memtier_request_t* req, int64_t timeout_ns, size_t* index_out);

typedef struct memtier_safetensors memtier_safetensors_t;

typedef struct memtier_tensor_info {
    const char* name;
    uint64_t name_len;
    const char* dtype;
    uint32_t dtype_bits;
    uint32_t ndim;
    const int64_t* shape;
    uint64_t offset;
    uint64_t nbytes;
} memtier_tensor_info_t;

int memtier_safetensors_open(memtier_ctx_t* ctx, const char* path,
                             memtier_safetensors_t** st_out);
int memtier_safetensors_close(memtier_safetensors_t* st);
int memtier_safetensors_count(memtier_safetensors_t* st, size_t* count_out);
int memtier_safetensors_get(memtier_safetensors_t* st, size_t index,
                            memtier_tensor_info_t* info);
int memtier_safetensors_find(memtier_safetensors_t* st, const char* name,
                             size_t name_len, size_t* index_out);
int memtier_safetensors_metadata(memtier_safetensors_t* st, size_t index,
                                 const char** key_out, const char** value_out);
int memtier_safetensors_load(memtier_safetensors_t* st, size_t index, void* dst,
                             uint64_t dst_size, int target);
int memtier_safetensors_load_all(memtier_safetensors_t* st, void* const* dsts,
                                 int64_t* results, int target);

typedef struct memtier_dataset memtier_dataset_t;

int memtier_dataset_open(memtier_ctx_t* ctx, const char* data_path,
                         const char* index_path, memtier_dataset_t** ds_out);
int memtier_dataset_open_tar(memtier_ctx_t* ctx, const char* tar_path,
                             memtier_dataset_t** ds_out);
int memtier_dataset_close(memtier_dataset_t* ds);
int memtier_dataset_count(memtier_dataset_t* ds, uint64_t* count_out);
int memtier_dataset_sample(memtier_dataset_t* ds, uint64_t index, uint64_t* offset_out,
                           uint64_t* size_out, const char** name_out);
int memtier_dataset_read(memtier_dataset_t* ds, uint64_t index, void* dst,
                         uint64_t dst_size, int target);
int memtier_dataset_read_batch(memtier_dataset_t* ds, const uint64_t* indices,
                               size_t n, void* const* dsts, int64_t* results,
                               int target);

typedef struct memtier_stats {
    uint64_t requests;
    uint64_t bytes;
    uint64_t cache_hit_requests;
    uint64_t cache_hit_bytes;
    uint64_t buffered_requests;
    uint64_t buffered_bytes;
    uint64_t direct_requests;
    uint64_t direct_bytes;
    uint64_t gds_requests;
    uint64_t gds_bytes;
    uint64_t staged_requests;
    uint64_t staged_bytes;
    uint64_t cache_hits;
    uint64_t cache_misses;
    uint64_t cache_evictions;
    uint64_t cache_resident_bytes;
    uint64_t cache_budget_bytes;
    uint64_t cache_inserted_bytes;
    uint64_t prefetch_requests;
    uint64_t prefetch_bytes;
    uint64_t readv_calls;
    uint64_t coalesced_reads;
    uint64_t storage_bytes;
    uint64_t direct_fallbacks;
    uint64_t bounce_bytes;
    uint64_t eintr_retries;
    uint64_t short_read_retries;
    uint64_t async_requests;
    uint64_t errors;
    uint64_t files_opened;
    uint64_t files_evicted;
    uint64_t stale_invalidations;
    uint64_t hbm_hit_requests;
    uint64_t hbm_hit_bytes;
    uint64_t hbm_inserted_bytes;
    uint64_t hbm_evictions;
    uint64_t hbm_resident_bytes;
    uint64_t hbm_budget_bytes;
    uint64_t gds_fallbacks;
    uint64_t h2d_bytes;
    uint64_t h2d_ns;
    uint64_t staged_read_ns;
    uint64_t revalidations;
    uint64_t readv_inline_hits;
    uint64_t readv_uring_batches;
    uint64_t readv_uring_reads;
    uint64_t readv_uring_fallback_off;
    uint64_t readv_uring_fallback_unavailable;
} memtier_stats_t;

int memtier_stats(memtier_ctx_t* ctx, memtier_stats_t* st);
int memtier_stats_sized(memtier_ctx_t* ctx, memtier_stats_t* st, size_t st_size);
int memtier_stats_reset(memtier_ctx_t* ctx);

#define MEMTIER_DEBUG_PANIC_EXPORT 1
#define MEMTIER_DEBUG_PANIC_WORKER 2

int memtier_debug_hook(memtier_ctx_t* ctx, int hook);
"""

#: MEMTIER_API functions of memtier.h deliberately not declared above
#: (name -> reason). Empty today: the binding declares the whole API.
EXCLUDED_FUNCTIONS: dict = {}

#: #defines of memtier.h not declared above (name -> reason).
EXCLUDED_DEFINES = {
    "MEMTIER_H": "include guard",
    "MEMTIER_API": "visibility attribute, not valid in a cdef",
    "MEMTIER_VERSION_NUMBER": "an expression; cffi takes only integer literals "
    "(PACKAGE_VERSION_NUMBER holds it)",
    "MEMTIER_VERSION_STRING": "a string (PACKAGE_VERSION holds it)",
}

LIB_NAME = "libmemtier.so"
ENV_LIBRARY = "MEMTIER_LIBRARY"

_lock = threading.RLock()
_ffi_obj: Any = None
_runtime: "Optional[Runtime]" = None


class Runtime:
    """The loaded library of this process (internal; never exposed as cdata)."""

    __slots__ = ("ffi", "lib", "path", "pid", "version", "version_number")

    def __init__(self, ffi: Any, lib: Any, path: str, pid: int) -> None:
        self.ffi = ffi
        self.lib = lib  # module global through _runtime: never collected (P3)
        self.path = path
        self.pid = pid
        self.version = ffi.string(lib.memtier_version()).decode("ascii", "replace")
        self.version_number = int(lib.memtier_version_number())


def get_ffi() -> Any:
    """The cffi ``FFI`` holding :data:`CDEF` (parsed once, on first use)."""
    global _ffi_obj
    f = _ffi_obj
    if f is None:
        with _lock:
            f = _ffi_obj
            if f is None:
                import cffi

                f = cffi.FFI()
                f.cdef(CDEF)
                _ffi_obj = f
    return f


def package_dir_library() -> str:
    """Path of the library shipped inside the package (may not exist)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib", LIB_NAME)


def _candidates() -> List[Tuple[str, str]]:
    """(how, path-or-name) pairs to try, in order."""
    explicit = os.environ.get(ENV_LIBRARY)
    if explicit:
        return [(f"${ENV_LIBRARY}", explicit)]
    out = [("packaged", package_dir_library())]
    import ctypes.util

    found = ctypes.util.find_library("memtier")
    out.append(("ctypes.util.find_library('memtier')", found or ""))
    return out


def _hint(errors: List[str]) -> str:
    text = " ".join(errors)
    hints = []
    if "static TLS" in text:
        hints.append(
            "the process ran out of static TLS space (other libraries loaded first use it up): "
            "import memtier and call it before those libraries load, or start Python with "
            "LD_PRELOAD=<path of libmemtier.so>"
        )
    if "musl" in text or "ld-musl" in text:
        hints.append("musl libc (Alpine) is not supported: use a glibc-based system")
    hints.append(
        "build the library with `pip install .` (needs Go >= 1.26), or point "
        f"{ENV_LIBRARY} at a libmemtier.so (e.g. the CMake build's build/libmemtier.so)"
    )
    return "; ".join(hints)


def _load(pid: int) -> Runtime:
    ffi = get_ffi()
    errors: List[str] = []
    for how, path in _candidates():
        if not path:
            errors.append(f"{how}: not found")
            continue
        try:
            lib = ffi.dlopen(path)
        except OSError as e:  # cffi puts dlerror() in the message
            errors.append(f"{how}: {path}: {e}")
            continue
        try:
            rt = Runtime(ffi, lib, path if os.sep in path else _resolve(path), pid)
        except AttributeError as e:  # not a MemTier library (missing symbol)
            errors.append(f"{how}: {path}: not a libmemtier.so ({e})")
            continue
        major = rt.version_number // 10000
        if major != PACKAGE_VERSION_NUMBER // 10000:
            raise _errors.LibraryLoadError(
                f"memtier: {path} is libmemtier {rt.version} (major {major}), but this "
                f"package (memtier {PACKAGE_VERSION}) needs major "
                f"{PACKAGE_VERSION_NUMBER // 10000}; {_hint([])}"
            )
        return rt
    raise _errors.LibraryLoadError(
        "memtier: cannot load libmemtier.so; tried:\n  "
        + "\n  ".join(errors)
        + "\nhint: "
        + _hint(errors)
    )


def _resolve(name: str) -> str:
    """The file a dlopen()ed soname maps to (from /proc/self/maps), or ``name``."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.rstrip().endswith("/" + name):
                    return line.split(None, 5)[-1].strip()
    except OSError:
        pass
    return name


def runtime() -> Runtime:
    """The library of this process, loading it on first use.

    Raises
    ------
    ForkError
        The library was loaded by a parent of this forked process.
    LibraryLoadError
        No candidate could be loaded (an ImportError and a RuntimeError).
    """
    rt = _runtime
    pid = os.getpid()
    if rt is not None:
        if rt.pid == pid:
            return rt
        raise _errors.fork_error(rt.pid, pid)
    with _lock:
        rt = _runtime
        if rt is None:
            rt = _load(pid)
            globals()["_runtime"] = rt
        elif rt.pid != pid:
            raise _errors.fork_error(rt.pid, pid)
    return rt


def loaded() -> Optional[Runtime]:
    """The loaded runtime (possibly of a parent process) or None; loads nothing."""
    return _runtime


def error_texts(status: int) -> Tuple[Optional[str], str]:
    """``(memtier_strerror(status), memtier_last_error())`` of this thread.

    Both are pure C in the library and safe in a forked child. Without a
    loaded library: ``(None, "")``.
    """
    rt = _runtime
    if rt is None:
        return None, ""
    ffi, lib = rt.ffi, rt.lib
    detail = ffi.string(lib.memtier_last_error()).decode("utf-8", "replace")
    text = ffi.string(lib.memtier_strerror(status)).decode("utf-8", "replace")
    return text, detail


def strerror(status: int) -> Optional[str]:
    """``memtier_strerror(status)`` (pure C), or None without a loaded library."""
    rt = _runtime
    if rt is None:
        return None
    return rt.ffi.string(rt.lib.memtier_strerror(status)).decode("utf-8", "replace")


_errors.set_error_texts(error_texts)
