// Package engine is the facade capi/ calls: a Context owns the configuration,
// the descriptor table, the I/O reader and worker pool, the DRAM cache and the
// stats, and serves reads, vectored reads, chunk loads (chunks*.go),
// prefetches and async requests; safetensors files and datasets opened
// through it (safetensors.go, dataset.go) read through chunk loads.
//
// Concurrency: every method is safe for concurrent use. Each public call holds
// a read lock on the context for its duration; Close takes the write lock, so
// it waits for calls in progress and later calls fail with errs.Closed.
// Async requests run on their own goroutines under the same rule.
//
// Layering: engine imports runtime/* and gpu; it never sees C types.
package engine
