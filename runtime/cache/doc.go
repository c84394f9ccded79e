// Package cache is MemTier's DRAM block cache: file bytes kept in fixed-size
// blocks under a hard byte budget, so repeated reads are served from memory.
//
// # Model
//
// A block is identified by (fileID, index): it holds bytes
// [index*BlockSize, (index+1)*BlockSize) of the file whose identity the engine
// numbered fileID (the engine gives a changed file a new fileID or drops the old
// one with DropFile, so the cache never decides staleness itself). Inside a block,
// validity is tracked per 4096-byte page, so a block can be filled piecemeal and
// a read only has to fetch the pages it lacks (Block.Fill).
//
// # Budget
//
// Resident bytes are (blocks allocated) * BlockSize and never exceed the budget
// given to New, at any instant, including blocks that were dropped while pinned
// and whose memory has not yet been returned to the Allocator. The budget is
// split over the shards in whole blocks; a budget smaller than one block (or
// smaller than one block per shard) caches nothing rather than exceed the cap.
//
// # Eviction: S3-FIFO
//
// Each shard runs S3-FIFO (Yang et al., SOSP 2023): a small FIFO S (about 10% of
// the shard's blocks), a main FIFO M and a ghost FIFO G that remembers only the
// keys recently evicted from S. New blocks enter S, or M when their key is in G
// (they were evicted recently and came back, so they are reused). A hit only
// bumps a 2-bit frequency under the shard mutex; no list is reordered on a hit.
// Eviction pops S while S is at or above its target: a block that was hit moves
// to M, one that was not is freed and its key goes to G. Otherwise M is popped
// as a CLOCK-like FIFO: blocks with frequency > 0 get it decremented and are
// reinserted, the first one with frequency 0 is freed.
//
// Why S3-FIFO: a one-pass scan larger than the cache streams through S and is
// evicted there (each scan block is seen once, frequency 0, straight out), so
// blocks read twice or more, which were promoted to M, stay in the cache; with
// LRU the scan would flush them. And because nothing is evicted while the shard
// is not full, a file smaller than the budget that is read twice is served
// entirely from the cache on the second pass. Shards are chosen as
// (hash(fileID) + index) mod shards, so consecutive blocks of one file are spread
// round-robin over the shards and such a file never overfills one shard while
// others have room.
//
// # Concurrency
//
// All methods of Cache and Block are safe for concurrent use. Each shard has one
// sync.Mutex guarding its map, FIFOs and frequencies. A block returned by Acquire
// or Peek is pinned (an atomic count) until Release, which is one atomic add and
// takes no lock; a pinned block is never evicted and its buffer is never reused.
// Page validity is a []atomic.Uint64 bitmap: Fill writes the bytes first and
// then sets the bits with atomic stores, and readers check them with atomic
// loads (Covers) before copying, so filling some pages while other goroutines
// copy out already valid pages is race free. Fills of one block are serialised
// by a per-block mutex, so each page is read from storage at most once.
//
// # Imports
//
// Pure Go: only the standard library and runtime/stats. No syscalls, no os, no
// cgo; memory comes from the injected Allocator (off-heap in the engine).
package cache
