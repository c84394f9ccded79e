// Package memtier is the root of MemTier's Go module: the runtime is in
// runtime/, the C ABI in capi/, the generator of the files that copy
// include/memtier.h in tools/mtgen.
//
// `go generate ./...` from the repository root rewrites those files from the
// header (tools/mtgen); `go test ./...` fails when one is stale.
package memtier

//go:generate go run ./tools/mtgen
