// Command capi is the C ABI of MemTier, built with
//
//	go build -buildmode=c-shared -o libmemtier.so ./capi
//
// Boundary rules (cgo's rules are at https://pkg.go.dev/cmd/cgo):
//   - The public memtier_* functions are C, in memtier.c. Each checks the
//     fork flag (set by a pthread_atfork child handler) and returns
//     MEMTIER_ERR_FORKED without entering Go in a forked child; otherwise it
//     converts handles to integers and calls the Go export mtgo_<name>.
//   - Handles are integer ids in registries (handles.go), never Go pointers; a
//     finalized or unknown id is MEMTIER_ERR_CLOSED, never a crash.
//   - Every export recovers panics into MEMTIER_ERR_INTERNAL (status.go), and
//     the engine recovers panics in its own goroutines.
//   - The last-error text lives in C thread-local storage (a pthread key, not
//     __thread, so the library's static TLS stays at Go's 8 bytes), set on the
//     caller's thread by the export itself.
//   - No Go signal handlers are installed (no os/signal).
//   - No I/O logic lives here: exports convert arguments, call the engine and
//     map errors. Two documented fast paths execute in C what the engine
//     decided: hit.c copies DRAM-cache hits from the engine's shared index,
//     and readv_pread.c runs the engine's pread plan of a cache-off readv
//     (engine.PreadPlan: the engine opens, checks and counts; C only moves
//     the bytes, and gives every element it cannot serve whole back to Go).
package main

func main() {}
