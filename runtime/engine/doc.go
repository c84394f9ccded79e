// Package engine is the facade capi/ calls: a Context owns the configuration,
// the source (runtime/source: local files through the descriptor table and
// the I/O reader), the DRAM cache and the stats, and serves reads, vectored
// reads, chunk loads (chunks*.go), prefetches and async requests; safetensors
// files and datasets opened through it (safetensors.go, dataset.go) read
// through chunk loads.
//
// Shape of a CPU request (plan.go, walk.go): the request becomes a plan, a
// list of spans in file order, each served by one tier of the stack
//
//	DRAM cache  (tierDRAM: a pinned, valid block, copied out)
//	source      (tierFill: read into a cache block, then copied out;
//	             tierSource: read straight into the destination)
//
// made once by makePlan (cache lookups, then the policy for the bytes the
// cache lacks), executed by the one span walker (exec: on the caller for a
// hot hit, in parallel units for large copies and reads), and formatted by
// Explain, so explain shows the plan a read runs. Read, ReadV (per group and
// for cached elements), Prefetch and chunk pieces all go through it. The CUDA
// target (gpuread.go) still walks the HBM and DRAM tiers on its own; moving it
// onto plans, with its state in gpu/, is the next step.
//
// Freshness: Context.trust (from config.Options.Freshness) and
// policy.ReadImmutable say how long an open file is trusted without a check;
// handle opens always check (openTrusting with files.TrustNone).
//
// Concurrency: every method is safe for concurrent use. Each public call holds
// a read lock on the context for its duration; Close takes the write lock, so
// it waits for calls in progress and later calls fail with errs.Closed.
// Async requests run on their own goroutines under the same rule.
//
// Layering: engine imports runtime/* and gpu; it never sees C types.
package engine
