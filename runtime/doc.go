// Package runtime is only a folder: the MemTier engine lives in its
// sub-packages (a Go package named runtime would shadow the standard library).
//
//	errs     status codes and the Error type shared by every layer
//	config   Options, defaults, MEMTIER_* environment parsing, validation
//	stats    lock-free counters and their snapshot
//	files    path -> open descriptors (buffered + O_DIRECT), file identity
//	iopath   pread loops, O_DIRECT with bounce buffers, task splitting, workers
//	mem      page-aligned buffers off the Go heap (cache blocks, bounce buffers)
//	cache    DRAM block cache (S3-FIFO eviction, byte budget, pinning)
//	policy   the path decision table, a pure function
//	engine   the Context facade that capi/ calls
//
// Everything here builds and tests with CGO_ENABLED=0.
package runtime
