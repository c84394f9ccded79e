/* TEST DOUBLE: NOT NVIDIA's libcuda / libcufile, and never installed or shipped.
 *
 * Types, constants and the private bridge between the two MemTier test doubles
 * (libcuda.so.1 and libcufile.so.0 built from fake_cuda.c and fake_cufile.c).
 * The constants are the public values of the CUDA driver API and cuFile that
 * gpu/ declares for itself; see README.md in this folder.
 */
#ifndef MEMTIER_FAKE_CUDA_DOUBLE_H
#define MEMTIER_FAKE_CUDA_DOUBLE_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct fake_ctx *CUcontext;
typedef struct fake_stream *CUstream;
typedef struct fake_event *CUevent;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713
};

/* The bridge: exported by the libcuda double, used by the libcufile double
 * (which links against it, as the real libcufile needs libcuda). */
int fake_cuda_is_initialized(void);
/* 1 when [p, p+n) lies inside one fake device allocation. */
int fake_cuda_device_range_ok(CUdeviceptr p, size_t n);
/* 1 when p is in device memory allocated as managed memory. */
int fake_cuda_is_managed(CUdeviceptr p);
/* The context current on the calling thread (NULL when none). */
CUcontext fake_cuda_current_context(void);
/* The stream-ordering check for a write into [p, p+n) that no stream
 * orders (cuFileRead): counts bug_unordered_write when a stream still has an
 * overlapping copy queued. */
void fake_cuda_check_write(CUdeviceptr p, size_t n);

/* Test hooks (both doubles): read one named counter (-1 when unknown), and
 * zero every counter and fault-injection count. */
long long fake_cuda_stat(const char *name);
void fake_cuda_reset(void);
long long fake_cufile_stat(const char *name);
void fake_cufile_reset(void);

#endif
