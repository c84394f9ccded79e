/* The executor of the engine's pread plan of a readv (engine.PreadPlan,
 * runtime/engine/readv_pread.go). Internal to libmemtier (not installed). */
#ifndef MEMTIER_READV_PREAD_H
#define MEMTIER_READV_PREAD_H
#include <stdint.h>

#include "memtier.h"

/* mt_readv_pread serves memtier_readv_ex(ctx id, path, iov, n, CPU, flags)
 * when the engine plans it as one buffered pread per element (the DRAM cache
 * off, every element of path, of one size, into a plausible destination):
 * it returns 1 with *rc the call's status, the preads done on the calling
 * thread and, from MT_RP_PAR_MIN elements, one resident worker thread, and
 * the elements the preads did not serve whole (past the end, would block,
 * a bad destination, an error) served by Go's readv, which reports them.
 * Returns 0, having done nothing, when the plan does not apply: the caller
 * then calls Go's readv for the whole call. Thread safe: calls that find the
 * worker busy read on their own thread only. */
int mt_readv_pread(uint64_t id, const char* path, memtier_iovec_t* iov, uint64_t n, uint32_t flags, int* rc);

#endif
