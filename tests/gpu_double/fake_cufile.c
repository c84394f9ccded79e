/* TEST DOUBLE: NOT NVIDIA's libcufile. Built into the build tree as
 * gpu_double/libcufile.so.0 for the gpu/ Go tests on machines without a GPU;
 * never installed, never shipped, never in the wheel.
 *
 * It implements exactly the cuFile calls gpu/ makes: cuFileDriverOpen,
 * cuFileHandleRegister, cuFileHandleDeregister and cuFileRead. A "GDS read"
 * is a pread into fake device memory of the libcuda double (this library
 * links against it, as the real libcufile needs libcuda), through a private
 * descriptor opened from /proc/self/fd so the caller's O_DIRECT flag does not
 * constrain the double. Return conventions follow cuFile: cuFileRead returns
 * the bytes read (0 at end of file), -1 with errno set, or the negative value
 * of a CUfileOpError. Switches and counters: README.md.
 */
#define _GNU_SOURCE
#include "fake_common.h"
#include "fake_cuda_double.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define HANDLE_MAGIC 0x46484e44u

/* cufile.h values. */
enum {
  CU_FILE_SUCCESS = 0,
  CU_FILE_DRIVER_NOT_INITIALIZED = 5001,
  CU_FILE_IO_NOT_SUPPORTED = 5008,
  CU_FILE_CUDA_DRIVER_ERROR = 5011,
  CU_FILE_CUDA_POINTER_INVALID = 5012,
  CU_FILE_CUDA_MEMORY_TYPE_INVALID = 5013,
  CU_FILE_CUDA_POINTER_RANGE_ERROR = 5014,
  CU_FILE_INVALID_FILE_TYPE = 5018,
  CU_FILE_INVALID_VALUE = 5022,
  CU_FILE_HANDLE_ALREADY_REGISTERED = 5028,
  CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1
};

typedef struct {
  int err;    /* CUfileOpError */
  int cu_err; /* CUresult */
} CUfileError_t;

typedef struct {
  int type;
  union {
    int fd;
    void *handle;
  } handle;
  const void *fs_ops;
} CUfileDescr_t;

struct fake_handle {
  unsigned magic;
  int fd;      /* the caller's descriptor */
  int priv_fd; /* ours, without O_DIRECT */
  struct fake_handle *next;
};
typedef struct fake_handle *CUfileHandle_t;

#define STATS(X)                                                                  \
  X(calls_cuFileDriverOpen) X(calls_cuFileHandleRegister)                         \
  X(calls_cuFileHandleDeregister) X(calls_cuFileRead) X(driver_open) X(handles_live) \
  X(registered_without_odirect) X(read_bytes) X(partial_reads) X(eof_reads)       \
  X(failed_reads) X(no_context_errors) X(bad_pointer_errors) X(unsupported_fs)    \
  X(bug_read_unregistered) X(calls_cuFileDriverGetProperties) X(compat_reads)

FAKE_STATS(STATS);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long long stats[S_COUNT];
static long long n_reads;
static struct fake_handle *handles;

static CUfileError_t status(int err, int cu_err) { return (CUfileError_t){err, cu_err}; }

EXPORT long long fake_cufile_stat(const char *name) {
  return stat_lookup(&mu, stats, stat_names, S_COUNT, name);
}

/* Zeroes the counters (the driver_open and handles_live gauges keep their
 * values) and the fault-injection count. */
EXPORT void fake_cufile_reset(void) {
  pthread_mutex_lock(&mu);
  for (int i = 0; i < S_COUNT; i++)
    if (i != S_driver_open && i != S_handles_live) stats[i] = 0;
  n_reads = 0;
  pthread_mutex_unlock(&mu);
}

/* cuFile's log: a line appended to $CUFILE_LOGFILE_PATH when that is set (the
 * real library's highest-priority log location), so scripts that gather the
 * log can be tested; nothing otherwise. */
static void log_line(const char *msg) {
  const char *path = getenv("CUFILE_LOGFILE_PATH");
  if (!path || !*path) return;
  FILE *f = fopen(path, "a");
  if (!f) return;
  fprintf(f, "fake_cufile: %s\n", msg);
  fclose(f);
}

static int compat_mode(void);

EXPORT CUfileError_t cuFileDriverOpen(void) {
  pthread_mutex_lock(&mu);
  stats[S_calls_cuFileDriverOpen]++;
  CUfileError_t r = status(CU_FILE_SUCCESS, 0);
  long fail = env_long("FAKE_CUFILE_DRIVER_OPEN_FAIL", 0);
  if (!fake_cuda_is_initialized())
    r = status(CU_FILE_CUDA_DRIVER_ERROR, CUDA_ERROR_NOT_INITIALIZED);
  else if (fail > 0)
    r = status((int)fail, 0);
  else
    stats[S_driver_open] = 1;
  pthread_mutex_unlock(&mu);
  if (r.err == CU_FILE_SUCCESS)
    log_line(compat_mode() ? "driver open, running in compatible mode (no nvidia-fs)" : "driver open, nvidia-fs 2.17");
  else
    log_line("driver open failed");
  return r;
}

/* Compatibility mode (FAKE_CUFILE_COMPAT_MODE=1): what cuFile does without
 * nvidia-fs.ko. Reads still work (POSIX reads and copies inside cuFile, here
 * the same pread) and are counted in compat_reads. */
static int compat_mode(void) { return env_long("FAKE_CUFILE_COMPAT_MODE", 0) != 0; }

/* CUfileDrvProps_t's leading fields as cufile.h lays them out: nvfs
 * {major_version, minor_version, poll_thresh_size, max_direct_io_size,
 * dstatusflags, dcontrolflags}, then fflags and the size limits. Only the
 * fields the library reads are filled; the rest are zero. */
typedef struct {
  struct {
    unsigned major_version, minor_version;
    size_t poll_thresh_size, max_direct_io_size;
    unsigned dstatusflags, dcontrolflags;
  } nvfs;
  unsigned fflags, max_device_cache_size, per_buffer_cache_size, max_device_pinned_mem_size;
  unsigned max_batch_io_count, max_batch_io_timeout_msecs;
} CUfileDrvProps_t;

enum { CU_FILE_NVME_SUPPORTED = 4 };

/* nvidia-fs 2.17 with NVMe support, or (compatibility mode) no nvidia-fs and
 * no P2PDMA bit: major_version 0 and dstatusflags 0. */
EXPORT CUfileError_t cuFileDriverGetProperties(CUfileDrvProps_t *props) {
  pthread_mutex_lock(&mu);
  stats[S_calls_cuFileDriverGetProperties]++;
  CUfileError_t r = status(CU_FILE_SUCCESS, 0);
  if (!stats[S_driver_open]) {
    r = status(CU_FILE_DRIVER_NOT_INITIALIZED, 0);
  } else if (!props) {
    r = status(CU_FILE_INVALID_VALUE, 0);
  } else {
    memset(props, 0, sizeof *props);
    if (!compat_mode()) {
      props->nvfs.major_version = 2;
      props->nvfs.minor_version = 17;
      props->nvfs.dstatusflags = 1u << CU_FILE_NVME_SUPPORTED;
    }
    props->nvfs.max_direct_io_size = 16 << 20;
  }
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT CUfileError_t cuFileHandleRegister(CUfileHandle_t *fh, CUfileDescr_t *descr) {
  pthread_mutex_lock(&mu);
  stats[S_calls_cuFileHandleRegister]++;
  CUfileError_t r = status(CU_FILE_SUCCESS, 0);
  struct stat st;
  int fl = -1;
  if (!stats[S_driver_open]) {
    r = status(CU_FILE_DRIVER_NOT_INITIALIZED, 0);
  } else if (!fh || !descr || descr->type != CU_FILE_HANDLE_TYPE_OPAQUE_FD || descr->fs_ops) {
    r = status(CU_FILE_INVALID_VALUE, 0);
  } else if ((fl = fcntl(descr->handle.fd, F_GETFL)) < 0 || fstat(descr->handle.fd, &st) != 0 ||
             !S_ISREG(st.st_mode)) {
    r = status(CU_FILE_INVALID_FILE_TYPE, 0);
  } else if (env_long("FAKE_CUFILE_UNSUPPORTED_FS", 0)) {
    stats[S_unsupported_fs]++;
    r = status(CU_FILE_IO_NOT_SUPPORTED, 0);
  } else {
    for (struct fake_handle *h = handles; h; h = h->next)
      if (h->fd == descr->handle.fd) r = status(CU_FILE_HANDLE_ALREADY_REGISTERED, 0);
  }
  if (r.err == CU_FILE_SUCCESS) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", descr->handle.fd);
    struct fake_handle *h = calloc(1, sizeof *h);
    int pfd = h ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (pfd < 0) {
      free(h);
      r = status(CU_FILE_INVALID_FILE_TYPE, 0);
    } else {
      h->magic = HANDLE_MAGIC;
      h->fd = descr->handle.fd;
      h->priv_fd = pfd;
      h->next = handles;
      handles = h;
      *fh = h;
      stats[S_handles_live]++;
      if (!(fl & O_DIRECT)) stats[S_registered_without_odirect]++;
    }
  }
  pthread_mutex_unlock(&mu);
  return r;
}

EXPORT void cuFileHandleDeregister(CUfileHandle_t fh) {
  pthread_mutex_lock(&mu);
  stats[S_calls_cuFileHandleDeregister]++;
  for (struct fake_handle **p = &handles; *p; p = &(*p)->next)
    if (*p == fh) {
      *p = fh->next;
      close(fh->priv_fd);
      fh->magic = 0;
      free(fh);
      stats[S_handles_live]--;
      break;
    }
  pthread_mutex_unlock(&mu);
}

static int live(CUfileHandle_t fh) {
  for (struct fake_handle *h = handles; h; h = h->next)
    if (h == fh) return 1;
  return 0;
}

EXPORT ssize_t cuFileRead(CUfileHandle_t fh, void *base, size_t size, off_t file_offset, off_t dev_offset) {
  pthread_mutex_lock(&mu);
  stats[S_calls_cuFileRead]++;
  ssize_t r = 0;
  int fd = -1, err = 0;
  CUdeviceptr dst = (CUdeviceptr)(uintptr_t)base + (CUdeviceptr)dev_offset;
  if (!live(fh)) {
    stats[S_bug_read_unregistered]++;
    r = -CU_FILE_INVALID_VALUE;
  } else if (file_offset < 0 || dev_offset < 0) {
    r = -CU_FILE_INVALID_VALUE;
  } else if (!fake_cuda_current_context()) {
    stats[S_no_context_errors]++;
    r = -CU_FILE_CUDA_DRIVER_ERROR;
  } else if (!fake_cuda_device_range_ok((CUdeviceptr)(uintptr_t)base, 1)) {
    stats[S_bad_pointer_errors]++;
    r = -CU_FILE_CUDA_POINTER_INVALID;
  } else if (fake_cuda_is_managed((CUdeviceptr)(uintptr_t)base)) {
    stats[S_bad_pointer_errors]++;
    r = -CU_FILE_CUDA_MEMORY_TYPE_INVALID; /* cuFile reads into device memory only */
  } else if (size > 0 && !fake_cuda_device_range_ok(dst, size)) {
    stats[S_bad_pointer_errors]++;
    r = -CU_FILE_CUDA_POINTER_RANGE_ERROR;
  } else {
    long after = env_long("FAKE_CUFILE_FAIL_READ_AFTER", -1);
    if (after >= 0 && n_reads++ >= after) {
      stats[S_failed_reads]++;
      long code = env_long("FAKE_CUFILE_FAIL_READ_CODE", 0);
      if (code > 0) {
        r = -code;
      } else {
        r = -1;
        err = EIO;
      }
    } else {
      fd = fh->priv_fd;
      if (compat_mode()) stats[S_compat_reads]++;
    }
  }
  pthread_mutex_unlock(&mu);
  if (fd < 0) {
    if (r == -1) errno = err;
    return r;
  }
  fake_cuda_check_write(dst, size);

  size_t want = size;
  long partial = env_long("FAKE_CUFILE_PARTIAL", 0);
  if (partial > 0 && want > (size_t)partial) want = (size_t)partial;
  size_t got = 0;
  while (got < want) {
    ssize_t n = pread(fd, (char *)(uintptr_t)dst + got, want - got, file_offset + (off_t)got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      pthread_mutex_lock(&mu);
      stats[S_failed_reads]++;
      pthread_mutex_unlock(&mu);
      errno = err;
      return -1;
    }
    if (n == 0) break;
    got += (size_t)n;
  }
  pthread_mutex_lock(&mu);
  stats[S_read_bytes] += (long long)got;
  if (got < size && got == want) stats[S_partial_reads]++;
  if (got < want) stats[S_eof_reads]++;
  pthread_mutex_unlock(&mu);
  return (ssize_t)got;
}
