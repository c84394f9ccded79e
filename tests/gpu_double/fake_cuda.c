/* TEST DOUBLE: NOT NVIDIA's libcuda. Built into the build tree as
 * gpu_double/libcuda.so.1 for the gpu/ Go tests on machines without a GPU;
 * never installed, never shipped, never in the wheel.
 *
 * It implements exactly the subset of the CUDA driver API that gpu/ calls,
 * over host memory:
 *   - "device memory" is malloc'd host memory in a table, so
 *     cuPointerGetAttribute answers DEVICE for it (interior pointers too),
 *     HOST for registered host memory, and CUDA_ERROR_INVALID_VALUE otherwise;
 *   - contexts (one primary context per fake device), streams and events are
 *     small objects; the current context is per thread, as in CUDA, and every
 *     call that needs one fails with CUDA_ERROR_INVALID_CONTEXT without it;
 *   - async copies run at once, or, with FAKE_CUDA_DEFER_COPIES=1, only when
 *     a later cuEventSynchronize / cuStreamSynchronize covers them (copies
 *     from registered host memory and device-to-device copies; a copy from
 *     pageable memory is taken at once, as the driver stages it), so a caller
 *     that reuses a buffer or reads the result before syncing gets wrong bytes.
 * Switches (environment, read at each call) and counters: README.md.
 */
#define _GNU_SOURCE
#include "fake_common.h"
#include "fake_cuda_double.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 8
#define CTX_MAGIC 0x43545831u
#define STREAM_MAGIC 0x5354524du
#define EVENT_MAGIC 0x4556544eu

struct fake_ctx {
  unsigned magic;
  int device;
  int user; /* made by cuCtxCreate (not a primary context) */
  int dead; /* a sticky error happened in it: every later call fails */
};

struct op {
  struct op *next;
  unsigned long long seq;
  int is_event;
  int done; /* the bytes already moved (immediate mode, pageable source) */
  void *dst;
  const void *src;
  size_t n;
  int src_pinned; /* source is registered host memory: check it at execution */
};

struct fake_stream {
  unsigned magic;
  CUcontext ctx;
  int nonblocking; /* CU_STREAM_NON_BLOCKING: no implicit sync with the legacy default stream */
  struct op *head, *tail;
};

struct fake_event {
  unsigned magic;
  CUcontext ctx;
  struct fake_stream *stream; /* stream of the last record, NULL when complete */
  unsigned long long seq;
};

enum kind { KIND_DEVICE = 1, KIND_HOST = 2 };

struct region {
  char *base;
  size_t size;
  int kind;
  int device;
  CUcontext ctx;
  size_t reserve; /* device memory: the VA range the driver reports (>= size; VMM) */
  int managed;    /* device memory from "cuMemAllocManaged" (FAKE_CUDA_MANAGED) */
};

/* ------------------------------------------------------------- counters */

#define STATS(X)                                                              \
  X(calls_cuInit) X(calls_cuDriverGetVersion) X(calls_cuDeviceGetCount)       \
  X(calls_cuDeviceGet) X(calls_cuDevicePrimaryCtxRetain)                      \
  X(calls_cuDevicePrimaryCtxRelease) X(calls_cuDevicePrimaryCtxGetState)      \
  X(primary_ctx_created) X(events_blocking_sync) X(events_timing)             \
  X(pointer_no_context) X(legacy_stream_syncs) X(per_thread_stream_syncs)    \
  X(calls_cuCtxGetCurrent) X(calls_cuCtxSetCurrent) X(calls_cuCtxGetDevice)   \
  X(calls_cuPointerGetAttribute) X(calls_cuMemAlloc) X(calls_cuMemFree)       \
  X(calls_cuMemHostRegister) X(calls_cuMemHostUnregister)                     \
  X(calls_cuMemcpyHtoDAsync) X(calls_cuMemcpyDtoH) X(calls_cuMemcpyDtoDAsync) \
  X(calls_cuStreamCreate) X(calls_cuStreamSynchronize)                        \
  X(calls_cuStreamDestroy) X(calls_cuEventCreate) X(calls_cuEventRecord)      \
  X(calls_cuEventSynchronize) X(calls_cuEventQuery) X(calls_cuEventDestroy)   \
  X(inflight) X(max_inflight) X(copies_pinned) X(copies_pageable)             \
  X(copies_deferred) X(bytes_htod) X(bytes_dtoh) X(bytes_dtod)                \
  X(device_bytes_live) X(device_bytes_peak) X(allocs_live)                    \
  X(host_registered_live) X(host_register_unaligned) X(streams_live)          \
  X(events_live) X(no_context_errors) X(context_mismatch_errors)              \
  X(bad_pointer_errors) X(failed_allocs) X(failed_copies)                     \
  X(failed_host_registers) X(failed_syncs) X(bug_freed_while_inflight)        \
  X(bug_unregistered_while_inflight) X(bug_unregister_busy)                   \
  X(calls_cuCtxCreate) X(calls_cuCtxDestroy) X(user_contexts_live)            \
  X(streams_in_user_contexts) X(host_registers_in_user_contexts)             \
  X(sticky_errors) X(bug_unordered_write)

FAKE_STATS(STATS);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long long stats[S_COUNT];
/* Fault-injection counts since the last fake_cuda_reset. */
static long long n_allocs, n_copies, n_host_registers, n_syncs;
static unsigned long long next_seq = 1;

static int initialized;
static int ndevices;
static struct fake_ctx primary[MAX_DEVICES];
/* References to each primary context (cuDevicePrimaryCtxRetain/Release); a
 * context at 0 references is "inactive". The double only counts: a released
 * context stays usable, where the driver would destroy it. Not reset. */
static long long primary_refs[MAX_DEVICES];
static __thread CUcontext current;

static struct region *regions;
static size_t nregions, capregions;
/* Every live stream, so busy() can look at the queues. */
static struct fake_stream **streams;
static size_t nstreams, capstreams;

static int deferred(void) { return env_long("FAKE_CUDA_DEFER_COPIES", 0) != 0; }

/* An injected failure: FAKE_..._AFTER=N lets the first N calls succeed. */
static int injected(const char *var, long long *count) {
  long after = env_long(var, -1);
  long long c = (*count)++;
  return after >= 0 && c >= after;
}

static void bump(int s, long long by) { stats[s] += by; }
static void gauge_inflight(long long by) {
  stats[S_inflight] += by;
  if (stats[S_inflight] > stats[S_max_inflight]) stats[S_max_inflight] = stats[S_inflight];
}

static int ctx_ok(CUcontext c) { return c && c->magic == CTX_MAGIC; }
static int stream_ok(CUstream s) { return s && s->magic == STREAM_MAGIC; }
static int event_ok(CUevent e) { return e && e->magic == EVENT_MAGIC; }

/* The region containing [p, p+n) (n may be 0: p itself), or NULL. */
static struct region *find(const void *p, size_t n) {
  const char *c = p;
  for (size_t i = 0; i < nregions; i++) {
    struct region *r = &regions[i];
    if (c >= r->base && c < r->base + r->size && n <= (size_t)(r->base + r->size - c)) return r;
    if (n == 0 && c == r->base) return r;
  }
  return NULL;
}
/* The region whose reported range (reserve, for VMM-style device memory)
 * contains p: what cuPointerGetAttribute answers for. */
static struct region *find_reported(const void *p) {
  const char *c = p;
  for (size_t i = 0; i < nregions; i++) {
    struct region *r = &regions[i];
    size_t ext = r->reserve > r->size ? r->reserve : r->size;
    if (c >= r->base && c < r->base + ext) return r;
  }
  return NULL;
}
static struct region *find_base(const void *p, int kind) {
  for (size_t i = 0; i < nregions; i++)
    if (regions[i].base == p && regions[i].kind == kind) return &regions[i];
  return NULL;
}
static int overlaps(const void *p, size_t n) {
  const char *c = p;
  for (size_t i = 0; i < nregions; i++)
    if (c < regions[i].base + regions[i].size && regions[i].base < c + n) return 1;
  return 0;
}
static int add_region(struct region r) {
  if (nregions == capregions) {
    size_t nc = capregions ? capregions * 2 : 64;
    struct region *nr = realloc(regions, nc * sizeof *nr);
    if (!nr) return 0;
    regions = nr;
    capregions = nc;
  }
  regions[nregions++] = r;
  return 1;
}
static void remove_region(struct region *r) { *r = regions[--nregions]; }

/* Runs (or retires) the stream's operations up to and including seq. */
static void drain(struct fake_stream *s, unsigned long long seq) {
  while (s->head && s->head->seq <= seq) {
    struct op *o = s->head;
    s->head = o->next;
    if (!s->head) s->tail = NULL;
    if (!o->is_event) {
      if (!o->done) {
        if (!find(o->dst, o->n)) {
          bump(S_bug_freed_while_inflight, 1);
        } else if (o->src_pinned && !find(o->src, o->n)) {
          bump(S_bug_unregistered_while_inflight, 1);
        } else {
          memcpy(o->dst, o->src, o->n);
        }
      }
      gauge_inflight(-1);
    }
    free(o);
  }
}

/* A sticky error (CUDA_ERROR_ILLEGAL_ADDRESS from a copy or a sync, as the
 * driver's "the context cannot be used" errors): the current context is
 * dead, and every later call that needs it fails with the same code, as in
 * the driver, where only a new process (or a reset of the primary context)
 * recovers. fake_cuda_reset() revives the contexts, standing in for that
 * new process. */
static CUresult kill_context(CUresult r) {
  if (!ctx_ok(current)) return r;
  current->dead = 1;
  /* The work queued in it never completes: retired without running. */
  for (size_t i = 0; i < nstreams; i++) {
    struct fake_stream *st = streams[i];
    if (st->ctx != current) continue;
    while (st->head) {
      struct op *o = st->head;
      st->head = o->next;
      if (!o->is_event) gauge_inflight(-1);
      free(o);
    }
    st->tail = NULL;
  }
  return r;
}

static int need_context(void) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!ctx_ok(current)) {
    bump(S_no_context_errors, 1);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (current->dead) {
    bump(S_sticky_errors, 1);
    return CUDA_ERROR_ILLEGAL_ADDRESS;
  }
  return CUDA_SUCCESS;
}

/* The argument checks of the device and context queries, in the driver's
 * order: CUDA_ERROR_NOT_INITIALIZED before cuInit, CUDA_ERROR_INVALID_VALUE
 * for a NULL out pointer, then (need_device) CUDA_ERROR_INVALID_DEVICE for an
 * ordinal that is not a fake device. */
static CUresult need_out(const void *out) {
  return !initialized ? CUDA_ERROR_NOT_INITIALIZED : !out ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
static CUresult need_device(const void *out, int ordinal) {
  CUresult r = need_out(out);
  return r == CUDA_SUCCESS && (ordinal < 0 || ordinal >= ndevices) ? CUDA_ERROR_INVALID_DEVICE : r;
}

/* The stream-ordering check: a write into [p, p+n) while another stream
 * still has a copy into an overlapping range queued (not yet covered by a
 * synchronisation) races with it: on a GPU the later-queued write can land
 * first and be overwritten, as a fill that did not wait for the producer's
 * stream is. Counted in bug_unordered_write (self: the writer's own stream,
 * whose queue is ordered; NULL for cuFileRead, which orders with nothing). */
static void check_ordering(const struct fake_stream *self, const char *p, size_t n) {
  for (size_t i = 0; i < nstreams; i++) {
    if (streams[i] == self) continue;
    for (struct op *o = streams[i]->head; o; o = o->next)
      if (!o->is_event && !o->done && (const char *)o->dst < p + n && p < (const char *)o->dst + o->n) {
        bump(S_bug_unordered_write, 1);
        return;
      }
  }
}

static int enqueue_copy(CUstream s, void *dst, const void *src, size_t n, int src_pinned, int can_defer) {
  check_ordering(s, dst, n);
  struct op *o = calloc(1, sizeof *o);
  if (!o) return CUDA_ERROR_OUT_OF_MEMORY;
  o->seq = next_seq++;
  o->dst = dst;
  o->src = src;
  o->n = n;
  o->src_pinned = src_pinned;
  if (can_defer && deferred()) {
    bump(S_copies_deferred, 1);
  } else {
    memcpy(dst, src, n);
    o->done = 1;
  }
  if (s->tail)
    s->tail->next = o;
  else
    s->head = o;
  s->tail = o;
  gauge_inflight(1);
  return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ the bridge */

EXPORT int fake_cuda_is_initialized(void) {
  pthread_mutex_lock(&mu);
  int r = initialized;
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT int fake_cuda_is_managed(CUdeviceptr p) {
  pthread_mutex_lock(&mu);
  struct region *r = find((void *)(uintptr_t)p, 0);
  int m = r && r->kind == KIND_DEVICE && r->managed;
  pthread_mutex_unlock(&mu);
  return m;
}

EXPORT int fake_cuda_device_range_ok(CUdeviceptr p, size_t n) {
  pthread_mutex_lock(&mu);
  struct region *r = find((void *)(uintptr_t)p, n);
  int ok = r && r->kind == KIND_DEVICE;
  pthread_mutex_unlock(&mu);
  return ok;
}

EXPORT CUcontext fake_cuda_current_context(void) { return current; }

EXPORT void fake_cuda_check_write(CUdeviceptr p, size_t n) {
  pthread_mutex_lock(&mu);
  check_ordering(NULL, (const char *)(uintptr_t)p, n);
  pthread_mutex_unlock(&mu);
}

EXPORT long long fake_cuda_stat(const char *name) {
  /* primary_refs_<d>: device d's primary context references (a gauge). */
  if (name && strncmp(name, "primary_refs_", 13) == 0) {
    long d = strtol(name + 13, NULL, 10);
    if (d < 0 || d >= MAX_DEVICES) return -1;
    pthread_mutex_lock(&mu);
    long long v = primary_refs[d];
    pthread_mutex_unlock(&mu);
    return v;
  }
  return stat_lookup(&mu, stats, stat_names, S_COUNT, name);
}

/* Zeroes the counters (the live gauges keep their values) and the
 * fault-injection counts. */
EXPORT void fake_cuda_reset(void) {
  pthread_mutex_lock(&mu);
  for (int i = 0; i < S_COUNT; i++) {
    if (i == S_inflight || i == S_device_bytes_live || i == S_allocs_live || i == S_host_registered_live ||
        i == S_streams_live || i == S_events_live || i == S_user_contexts_live)
      continue;
    stats[i] = 0;
  }
  stats[S_max_inflight] = stats[S_inflight];
  stats[S_device_bytes_peak] = stats[S_device_bytes_live];
  n_allocs = n_copies = n_host_registers = n_syncs = 0;
  for (int i = 0; i < MAX_DEVICES; i++) primary[i].dead = 0;
  if (ctx_ok(current)) current->dead = 0;
  pthread_mutex_unlock(&mu);
}

/* ---------------------------------------------------------- driver API */

EXPORT CUresult cuGetErrorName(CUresult e, const char **s) {
  static const struct {
    int code;
    const char *name;
  } names[] = {
      {CUDA_SUCCESS, "CUDA_SUCCESS"},
      {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
      {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
      {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
      {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
      {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
      {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
      {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
      {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY"},
      {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"},
      {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"},
      {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"},
  };
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].code == e) {
      *s = names[i].name;
      return CUDA_SUCCESS;
    }
  *s = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuInit(unsigned flags) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuInit, 1);
  CUresult r = CUDA_SUCCESS;
  if (flags != 0) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else if (env_long("FAKE_CUDA_NO_DEVICE", 0)) {
    r = CUDA_ERROR_NO_DEVICE;
  } else if (env_long("FAKE_CUDA_INIT_FAIL", 0) > 0) {
    r = (CUresult)env_long("FAKE_CUDA_INIT_FAIL", 0); /* e.g. 3: a child forked after the parent's cuInit */
  } else {
    long n = env_long("FAKE_CUDA_DEVICES", 1);
    if (n < 1) n = 1;
    if (n > MAX_DEVICES) n = MAX_DEVICES;
    if (!initialized) {
      ndevices = (int)n;
      for (int i = 0; i < MAX_DEVICES; i++) primary[i] = (struct fake_ctx){CTX_MAGIC, i, 0, 0};
    }
    initialized = 1;
  }
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT CUresult cuDriverGetVersion(int *v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  bump(S_calls_cuDriverGetVersion, 1);
  pthread_mutex_unlock(&mu);
  *v = 12040;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *n) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuDeviceGetCount, 1);
  CUresult r = need_out(n);
  if (r == CUDA_SUCCESS) *n = ndevices;
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuDeviceGet, 1);
  CUresult r = need_device(d, ordinal);
  if (r == CUDA_SUCCESS) *d = ordinal;
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuDevicePrimaryCtxRetain, 1);
  CUresult r = need_device(c, d);
  if (r == CUDA_SUCCESS) {
    *c = &primary[d];
    if (primary_refs[d]++ == 0) bump(S_primary_ctx_created, 1);
  }
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuDevicePrimaryCtxRelease, 1);
  CUresult r = !initialized ? CUDA_ERROR_NOT_INITIALIZED : (d < 0 || d >= ndevices) ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
  if (r == CUDA_SUCCESS && primary_refs[d] == 0) r = CUDA_ERROR_INVALID_CONTEXT; /* nothing to release */
  if (r == CUDA_SUCCESS) primary_refs[d]--;
  pthread_mutex_unlock(&mu);
  return r;
}

/* flags: the context's flags (0 here); active: 1 while it has references. */
EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned *flags, int *active) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuDevicePrimaryCtxGetState, 1);
  CUresult r = need_device(flags, d);
  if (r == CUDA_SUCCESS && !active) r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS) {
    *flags = 0;
    *active = primary_refs[d] > 0;
  }
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *c) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuCtxGetCurrent, 1);
  CUresult r = need_out(c);
  if (r == CUDA_SUCCESS) *c = current;
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext c) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuCtxSetCurrent, 1);
  CUresult r = !initialized ? CUDA_ERROR_NOT_INITIALIZED : (c && !ctx_ok(c)) ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
  if (r == CUDA_SUCCESS) current = c;
  pthread_mutex_unlock(&mu);
  return r;
}

/* A context of the caller's own (not the device's primary one), current
 * on this thread afterwards, as cuCtxCreate pushes it. Its streams and the
 * host memory registered while it was current die with it (cuCtxDestroy),
 * as in the driver; copies into its device memory from another context of
 * the same device work (unified addressing). */
EXPORT CUresult cuCtxCreate_v2(CUcontext *c, unsigned flags, CUdevice d) {
  (void)flags;
  pthread_mutex_lock(&mu);
  bump(S_calls_cuCtxCreate, 1);
  CUresult r = need_device(c, d);
  if (r == CUDA_SUCCESS) {
    struct fake_ctx *x = calloc(1, sizeof *x);
    if (!x) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      *x = (struct fake_ctx){CTX_MAGIC, d, 1, 0};
      *c = x;
      current = x;
      bump(S_user_contexts_live, 1);
    }
  }
  pthread_mutex_unlock(&mu);
  return r;
}

static void destroy_stream_locked(struct fake_stream *s);

/* Destroys a context from cuCtxCreate: its device memory is freed, its host
 * registrations dropped and its streams destroyed (queued copies complete
 * first). The handle is never reused (the struct is kept, marked dead). */
EXPORT CUresult cuCtxDestroy_v2(CUcontext c) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuCtxDestroy, 1);
  CUresult r = !initialized ? CUDA_ERROR_NOT_INITIALIZED : (!ctx_ok(c) || !c->user) ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
  if (r == CUDA_SUCCESS) {
    for (size_t i = 0; i < nstreams;)
      if (streams[i]->ctx == c)
        destroy_stream_locked(streams[i]);
      else
        i++;
    for (size_t i = 0; i < nregions;) {
      struct region *g = &regions[i];
      if (g->ctx != c) {
        i++;
        continue;
      }
      if (g->kind == KIND_DEVICE) {
        bump(S_allocs_live, -1);
        bump(S_device_bytes_live, -(long long)g->size);
        free(g->base);
      } else {
        bump(S_host_registered_live, -1);
      }
      remove_region(g);
    }
    c->magic = 0;
    if (current == c) current = NULL;
    bump(S_user_contexts_live, -1);
  }
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *d) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuCtxGetDevice, 1);
  CUresult r = need_context();
  if (r == CUDA_SUCCESS && !d) r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS) *d = current->device;
  pthread_mutex_unlock(&mu);
  return r;
}

/* Attribute values as in cuda.h's CUpointer_attribute / CUmemorytype. */
enum {
  ATTR_CONTEXT = 1,
  ATTR_MEMORY_TYPE = 2,
  ATTR_DEVICE_ORDINAL = 9,
  ATTR_RANGE_START_ADDR = 11,
  ATTR_RANGE_SIZE = 12,
  ATTR_MAPPED = 13,
  ATTR_IS_MANAGED = 8,
  MEMORYTYPE_HOST = 1,
  MEMORYTYPE_DEVICE = 2
};

EXPORT CUresult cuPointerGetAttribute(void *data, int attribute, CUdeviceptr ptr) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuPointerGetAttribute, 1);
  CUresult r = CUDA_SUCCESS;
  struct region *g = NULL;
  if (!initialized) {
    r = CUDA_ERROR_NOT_INITIALIZED;
  } else if (!data) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else if (env_long("FAKE_CUDA_POINTER_NEEDS_CONTEXT", 0) && !ctx_ok(current)) {
    /* Some drivers answer queries only under a current context (an
     * expected answer, so not counted in no_context_errors). */
    bump(S_pointer_no_context, 1);
    r = CUDA_ERROR_INVALID_CONTEXT;
  } else if (!(g = find_reported((void *)(uintptr_t)ptr))) {
    bump(S_bad_pointer_errors, 1);
    r = CUDA_ERROR_INVALID_VALUE;
  } else if (attribute == ATTR_DEVICE_ORDINAL && g->kind == KIND_DEVICE &&
             env_long("FAKE_CUDA_NO_ORDINAL_ATTR", 0)) {
    r = CUDA_ERROR_INVALID_VALUE; /* an attribute this "driver" does not answer */
  } else {
    char *c = (char *)(uintptr_t)ptr;
    switch (attribute) {
    case ATTR_CONTEXT:
      *(CUcontext *)data = g->kind == KIND_DEVICE ? g->ctx : NULL;
      break;
    case ATTR_MEMORY_TYPE:
      *(unsigned *)data = g->kind == KIND_DEVICE ? MEMORYTYPE_DEVICE : MEMORYTYPE_HOST;
      break;
    case ATTR_DEVICE_ORDINAL:
      *(int *)data = g->device;
      break;
    case ATTR_RANGE_START_ADDR:
      *(CUdeviceptr *)data = (CUdeviceptr)(uintptr_t)g->base;
      break;
    case ATTR_RANGE_SIZE:
      *(size_t *)data = g->reserve > g->size ? g->reserve : g->size;
      break;
    case ATTR_MAPPED: /* a boolean; written as one byte */
      *(unsigned char *)data = c < g->base + g->size;
      break;
    case ATTR_IS_MANAGED: /* a boolean; written as one byte */
      *(unsigned char *)data = g->kind == KIND_DEVICE && g->managed;
      break;
    default:
      r = CUDA_ERROR_INVALID_VALUE;
    }
  }
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuMemAlloc, 1);
  CUresult r = need_context();
  if (r == CUDA_SUCCESS && (!p || n == 0)) r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS) {
    long cap = env_long("FAKE_CUDA_DEVICE_BYTES", -1);
    if (injected("FAKE_CUDA_FAIL_ALLOC_AFTER", &n_allocs) ||
        (cap >= 0 && stats[S_device_bytes_live] + (long long)n > cap)) {
      bump(S_failed_allocs, 1);
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (r == CUDA_SUCCESS) {
    /* FAKE_CUDA_VMM_RESERVE_BYTES: extra unmapped VA after the allocation,
     * reported in its range (allocated here too, so no other region can lie
     * in it, but never a valid copy target). */
    long extra = env_long("FAKE_CUDA_VMM_RESERVE_BYTES", 0);
    if (extra < 0) extra = 0;
    char *b = malloc(n + (size_t)extra);
    if (!b) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      memset(b, 0xA5, n); /* uninitialised device memory is not zero */
      int managed = env_long("FAKE_CUDA_MANAGED", 0) != 0;
      if (!add_region((struct region){b, n, KIND_DEVICE, current->device, current, n + (size_t)extra, managed})) {
        free(b);
        r = CUDA_ERROR_OUT_OF_MEMORY;
      } else {
        *p = (CUdeviceptr)(uintptr_t)b;
        bump(S_allocs_live, 1);
        bump(S_device_bytes_live, (long long)n);
        if (stats[S_device_bytes_live] > stats[S_device_bytes_peak])
          stats[S_device_bytes_peak] = stats[S_device_bytes_live];
      }
    }
  }
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuMemFree, 1);
  CUresult r = initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
  struct region *g = r ? NULL : find_base((void *)(uintptr_t)p, KIND_DEVICE);
  if (r == CUDA_SUCCESS && !g) {
    bump(S_bad_pointer_errors, 1);
    r = CUDA_ERROR_INVALID_VALUE;
  }
  if (g) {
    bump(S_allocs_live, -1);
    bump(S_device_bytes_live, -(long long)g->size);
    free(g->base);
    remove_region(g);
  }
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
  (void)flags;
  pthread_mutex_lock(&mu);
  bump(S_calls_cuMemHostRegister, 1);
  CUresult r = need_context();
  if (r == CUDA_SUCCESS && (!p || n == 0)) r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS && overlaps(p, n)) r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  if (r == CUDA_SUCCESS && injected("FAKE_CUDA_FAIL_HOST_REGISTER_AFTER", &n_host_registers)) {
    bump(S_failed_host_registers, 1);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (r == CUDA_SUCCESS && !add_region((struct region){p, n, KIND_HOST, current->device, current, n, 0}))
    r = CUDA_ERROR_OUT_OF_MEMORY;
  if (r == CUDA_SUCCESS) {
    bump(S_host_registered_live, 1);
    if (((uintptr_t)p & 4095) || (n & 4095)) bump(S_host_register_unaligned, 1);
    if (current->user) bump(S_host_registers_in_user_contexts, 1);
  }
  pthread_mutex_unlock(&mu);
  return r;
}

/* Is any queued, not yet executed copy reading [p, p+n)? */
static int busy(const char *p, size_t n);

EXPORT CUresult cuMemHostUnregister(void *p) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuMemHostUnregister, 1);
  CUresult r = need_context();
  struct region *g = r ? NULL : find_base(p, KIND_HOST);
  if (r == CUDA_SUCCESS && !g) r = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  if (g) {
    if (busy(g->base, g->size)) bump(S_bug_unregister_busy, 1);
    bump(S_host_registered_live, -1);
    remove_region(g);
  }
  pthread_mutex_unlock(&mu);
  return r;
}


static int busy(const char *p, size_t n) {
  for (size_t i = 0; i < nstreams; i++)
    for (struct op *o = streams[i]->head; o; o = o->next)
      if (!o->is_event && !o->done && (const char *)o->src < p + n && p < (const char *)o->src + o->n) return 1;
  return 0;
}

static CUresult check_stream(CUstream s) {
  CUresult r = need_context();
  if (r != CUDA_SUCCESS) return r;
  if (!stream_ok(s)) return CUDA_ERROR_INVALID_HANDLE;
  if (s->ctx != current) {
    bump(S_context_mismatch_errors, 1);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  return CUDA_SUCCESS;
}

static CUresult copy_fault(void) {
  if (injected("FAKE_CUDA_FAIL_COPY_AFTER", &n_copies)) {
    bump(S_failed_copies, 1);
    return kill_context(CUDA_ERROR_ILLEGAL_ADDRESS);
  }
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuMemcpyHtoDAsync, 1);
  CUresult r = check_stream(s);
  struct region *d = NULL, *h = NULL;
  if (r == CUDA_SUCCESS && n > 0) {
    d = find((void *)(uintptr_t)dst, n);
    h = find(src, n);
    if (!src || !d || d->kind != KIND_DEVICE || (h && h->kind != KIND_HOST)) {
      bump(S_bad_pointer_errors, 1);
      r = CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (r == CUDA_SUCCESS && n > 0) r = copy_fault();
  if (r == CUDA_SUCCESS && n > 0) {
    bump(h ? S_copies_pinned : S_copies_pageable, 1);
    bump(S_bytes_htod, (long long)n);
    r = enqueue_copy(s, (void *)(uintptr_t)dst, src, n, h != NULL, h != NULL);
  }
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuMemcpyDtoDAsync, 1);
  CUresult r = check_stream(s);
  if (r == CUDA_SUCCESS && n > 0) {
    struct region *d = find((void *)(uintptr_t)dst, n), *g = find((void *)(uintptr_t)src, n);
    if (!d || !g || d->kind != KIND_DEVICE || g->kind != KIND_DEVICE) {
      bump(S_bad_pointer_errors, 1);
      r = CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (r == CUDA_SUCCESS && n > 0) r = copy_fault();
  if (r == CUDA_SUCCESS && n > 0) {
    bump(S_bytes_dtod, (long long)n);
    r = enqueue_copy(s, (void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, 0, 1);
  }
  pthread_mutex_unlock(&mu);
  return r;
}

/* Synchronous: it does not wait for work queued on non-blocking streams,
 * just as the real call does not. */
EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuMemcpyDtoH, 1);
  CUresult r = need_context();
  if (r == CUDA_SUCCESS && n > 0) {
    struct region *g = find((void *)(uintptr_t)src, n);
    if (!dst || !g || g->kind != KIND_DEVICE) {
      bump(S_bad_pointer_errors, 1);
      r = CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (r == CUDA_SUCCESS && n > 0) r = copy_fault();
  if (r == CUDA_SUCCESS && n > 0) {
    memcpy(dst, (const void *)(uintptr_t)src, n);
    bump(S_bytes_dtoh, (long long)n);
  }
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT CUresult cuStreamCreate(CUstream *ps, unsigned flags) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuStreamCreate, 1);
  CUresult r = need_context();
  if (r == CUDA_SUCCESS && !ps) r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS && nstreams == capstreams) {
    size_t nc = capstreams ? capstreams * 2 : 16;
    struct fake_stream **ns = realloc(streams, nc * sizeof *ns);
    if (!ns)
      r = CUDA_ERROR_OUT_OF_MEMORY;
    else {
      streams = ns;
      capstreams = nc;
    }
  }
  if (r == CUDA_SUCCESS) {
    struct fake_stream *s = calloc(1, sizeof *s);
    if (!s) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      s->magic = STREAM_MAGIC;
      s->ctx = current;
      s->nonblocking = (flags & 1) != 0;
      streams[nstreams++] = s;
      *ps = s;
      bump(S_streams_live, 1);
      if (current->user) bump(S_streams_in_user_contexts, 1);
    }
  }
  pthread_mutex_unlock(&mu);
  return r;
}

static CUresult sync_fault(void) {
  if (injected("FAKE_CUDA_FAIL_SYNC_AFTER", &n_syncs)) {
    bump(S_failed_syncs, 1);
    return kill_context(CUDA_ERROR_ILLEGAL_ADDRESS);
  }
  return CUDA_SUCCESS;
}

/* cuda.h's CU_STREAM_LEGACY ((CUstream)0x1) and CU_STREAM_PER_THREAD
 * ((CUstream)0x2): the current context's default streams. Nothing is queued
 * on them here; a sync of the legacy one waits for every blocking stream of
 * the context, as the legacy default stream's implicit synchronisation does. */
#define FAKE_STREAM_LEGACY ((CUstream)(uintptr_t)1)
#define FAKE_STREAM_PER_THREAD ((CUstream)(uintptr_t)2)

EXPORT CUresult cuStreamSynchronize(CUstream s) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuStreamSynchronize, 1);
  if (s == FAKE_STREAM_LEGACY || s == FAKE_STREAM_PER_THREAD) {
    CUresult r = need_context();
    if (r == CUDA_SUCCESS) {
      bump(s == FAKE_STREAM_LEGACY ? S_legacy_stream_syncs : S_per_thread_stream_syncs, 1);
      if (s == FAKE_STREAM_LEGACY)
        for (size_t i = 0; i < nstreams; i++)
          if (streams[i]->ctx == current && !streams[i]->nonblocking) drain(streams[i], ~0ULL);
      r = sync_fault();
    }
    pthread_mutex_unlock(&mu);
    return r;
  }
  CUresult r = check_stream(s);
  if (r == CUDA_SUCCESS) {
    drain(s, ~0ULL); /* the work completes even when the sync reports an error */
    r = sync_fault();
  }
  pthread_mutex_unlock(&mu);
  return r;
}

/* Drains s (queued work still completes, as in CUDA), unlists and frees it. */
static void destroy_stream_locked(struct fake_stream *s) {
  drain(s, ~0ULL);
  for (size_t i = 0; i < nstreams; i++)
    if (streams[i] == s) {
      streams[i] = streams[--nstreams];
      break;
    }
  s->magic = 0;
  free(s);
  bump(S_streams_live, -1);
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuStreamDestroy, 1);
  CUresult r = check_stream(s);
  if (r == CUDA_SUCCESS) destroy_stream_locked(s);
  pthread_mutex_unlock(&mu);
  return r;
}

/* cuda.h: CU_EVENT_BLOCKING_SYNC 1, CU_EVENT_DISABLE_TIMING 2 (recorded in
 * events_blocking_sync / events_timing: the double never spins). */
EXPORT CUresult cuEventCreate(CUevent *pe, unsigned flags) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuEventCreate, 1);
  CUresult r = need_context();
  if (r == CUDA_SUCCESS && !pe) r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS && (flags & ~7u)) r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS) {
    if (flags & 1) bump(S_events_blocking_sync, 1);
    if (!(flags & 2)) bump(S_events_timing, 1);
    struct fake_event *e = calloc(1, sizeof *e);
    if (!e) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      e->magic = EVENT_MAGIC;
      e->ctx = current;
      *pe = e;
      bump(S_events_live, 1);
    }
  }
  pthread_mutex_unlock(&mu);
  return r;
}

/* Is the event's last record still queued on a live stream? */
static struct fake_stream *pending_stream(CUevent e) {
  if (!e->stream) return NULL;
  for (size_t i = 0; i < nstreams; i++)
    if (streams[i] == e->stream) {
      for (struct op *o = e->stream->head; o; o = o->next)
        if (o->seq == e->seq) return e->stream;
      return NULL;
    }
  return NULL;
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuEventRecord, 1);
  CUresult r = check_stream(s);
  if (r == CUDA_SUCCESS && (!event_ok(e) || e->ctx != s->ctx)) r = CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS) {
    struct op *o = calloc(1, sizeof *o);
    if (!o) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      o->seq = next_seq++;
      o->is_event = 1;
      if (s->tail)
        s->tail->next = o;
      else
        s->head = o;
      s->tail = o;
      e->stream = s;
      e->seq = o->seq;
    }
  }
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT CUresult cuEventSynchronize(CUevent e) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuEventSynchronize, 1);
  CUresult r = need_context();
  if (r == CUDA_SUCCESS && !event_ok(e)) r = CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS) {
    struct fake_stream *s = pending_stream(e);
    if (s) drain(s, e->seq);
    e->stream = NULL;
    r = sync_fault();
  }
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT CUresult cuEventQuery(CUevent e) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuEventQuery, 1);
  CUresult r = need_context();
  if (r == CUDA_SUCCESS && !event_ok(e)) r = CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS && pending_stream(e)) r = CUDA_ERROR_NOT_READY;
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  pthread_mutex_lock(&mu);
  bump(S_calls_cuEventDestroy, 1);
  CUresult r = need_context();
  if (r == CUDA_SUCCESS && !event_ok(e)) r = CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS) {
    e->magic = 0;
    free(e);
    bump(S_events_live, -1);
  }
  pthread_mutex_unlock(&mu);
  return r;
}
