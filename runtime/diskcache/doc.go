// Package diskcache is MemTier's disk cache tier (the tier stack is in
// runtime/engine's doc comment): blocks of remote objects kept in a local
// directory (e.g. an NVMe) across runs and processes, between the DRAM cache
// and the remote source. It is off unless a directory is configured (EnvDir, EnvBytes).
//
// Layering: diskcache imports runtime/remote, runtime/source and
// runtime/errs; the engine wraps its remote.Source in a Source when a
// directory is set. Open, and so every Object and its Version, stay the
// remote Source's: the DRAM cache above keys blocks exactly as before.
//
// Entries. One file per block of BlockBytes (4 MiB, see DefaultBlockBytes)
// of one object version, named <32 hex of SHA-256(identity)>-<16 hex of
// SHA-256(validator, size)>-<block index, 8 hex>.blk. The identity is
// remote.Client.Address (s3: endpoint, bucket, key; http(s): the URL
// without X-Amz-* query parameters); the validator is the ETag, else the
// Last-Modified header; an object with neither is not cached. The header
// (entry.go) repeats the identity, with any query replaced by a hash, the
// validator, offset, length, object size and a checksum (CRC-32C, CRC-32
// or XXH3, whichever this CPU computes fastest: sum.go) of each 64 KiB
// piece of the payload (pieceBytes), so no credential or presigned query
// reaches a file name or a header. A hit reads and checks the header and
// only the pieces that overlap the bytes it needs: a 16-112 KiB sample of
// a 4 MiB block costs a piece or three, not the whole block.
// ReadSegs serves several ranges of one entry (a batch of neighbouring
// samples) with each of their pieces read and checked once (segs.go).
// Meta entries (meta.go) are entries at block indices no object reaches,
// holding a blob derived from the object version (a tar shard's member
// list), under the same format, checks, budget and eviction.
//
// Validation: a read looks only for entries of the Object's own validator,
// so an overwritten object (new ETag) misses and is fetched; writing its
// first new entry removes the old version's entries (Stats.StaleEntries),
// and any left behind age out by eviction. An entry whose size, header or
// checksum is wrong (torn, truncated, corrupt) is never served: it is
// counted (Stats.CorruptEntries), deleted and refetched. A corrupt piece
// is found by the first read that needs it (reads of other pieces of the
// entry, which check out, are served). An entry of an older format
// version is a miss too: counted stale (Stats.StaleEntries), deleted and
// refetched.
//
// Trust (trust.go): a piece this process read and checked through an
// entry descriptor it holds open (fds.go) is served again without its
// checksum, by preadv2 RWF_NOWAIT of just the bytes asked for, when (1)
// a fstat of the descriptor after that read shows the identity (inode,
// size, mtime, ctime in nanoseconds) a fstat showed before the check, and
// (2) every byte came from the page cache: cachestat(2) finds every page
// of the range cached before the read (RWF_NOWAIT alone is not enough:
// it starts readahead and succeeds when a fast device completes it
// within the call; on kernels without cachestat it is the only check).
// Any write, truncate, utimensat,
// unlink or rename of the file by any process moves its ctime, so (1)
// fails after a change and the pieces are read and checked again; a check
// counts only when it starts more than 100 ms after the file's last change
// (trustSettle), since the kernel stamps changes from a clock that moves
// in ticks and a change in the tick of the one before could leave the
// identity equal. (2) keeps the checksum's guard against the device:
// pages read back from it after an eviction are checked again
// (a page not cached, EAGAIN or a short read falls back to the checked
// read, which trusts them anew). This process's own mtime refresh moves ctime too: the next
// read is checked, and trusted again from the first check 100 ms on
// (Stats.TrustFallbacks counts those reads, Stats.TrustedPieces the
// pieces served from trust). Known gaps, where bytes other than those
// checked can be served: a store through a shared writable mapping of
// the entry into a page that is already dirty (the kernel moves mtime and
// ctime at the first write fault of a clean page only); a single write(2)
// under way since before the check (ctime moves when it starts); pages
// evicted and read back from the device by another reader (not this
// Cache's checked read) before a trusted read; and a wall clock stepped
// back, so that a later change can get the timestamps of the one before.
// Entries are only ever written whole and renamed into place, so these
// take another program writing into the cache directory's files; set
// EnvTrust=0 (Options.NoTrust) to check every read.
//
// Crash safety: an entry is written to a temporary file (".tmp-*") in the
// directory, then renamed into place, so a reader sees it whole or not at
// all. No fsync (see put): the checks above catch what a power loss can
// leave. Temporary files older than 10 minutes are a dead writer's and are
// removed by the next scan.
//
// Budget and eviction, across processes: the lock file
// (memtier-diskcache.lock, flock LOCK_EX) serializes every change to the
// set of files and records the bytes they hold (file sizes, headers and
// temporary files included). A writer reserves its entry's bytes under the
// lock, creating the temporary file at full size, so the directory never
// holds more than the budget at any instant, whatever the number of
// processes; when a reservation does not fit, the writer scans the
// directory and removes entries, oldest "used" first, down to 15/16 of the
// budget. "Used" is an entry's mtime: set when written, and moved to now by
// a hit when older than 10 seconds (utimensat), so it is visible to every
// process and survives restarts; atime is not used because relatime and
// noatime mounts do not keep it. Processes with different budgets each
// enforce their own when they write. Readers take no lock: rename and
// unlink never tear a file a reader has open.
//
// Writes: a fetched block that lands whole in the caller's buffer is
// written from there by the goroutine that fetched it, while the other
// blocks' GETs go on, before the read returns (write-through, a few blocks
// at a time; a block that finds no slot within QueueWait is dropped: see
// through.go). A block fetched into a buffer of its own (the first or last
// of a read that covers it only in part) waits in a queue of at most
// QueueBytes (64 MiB) for one background goroutine to write it
// (write-behind); a block that finds no room within QueueWait is dropped.
// Options.Synchronous writes every block before the read returns.
//
// Failures: a directory that cannot be created or written fails Open with
// a clear error (the engine then logs one warning and reads without the
// disk cache: a cache must not fail a read the source can serve). Errors
// while caching are counted (Stats.WriteErrors) and never fail a read.
package diskcache
