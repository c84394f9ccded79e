package diskcache

import "time"

// Write-through: a block that lands whole in the caller's buffer is written
// from there, by the goroutine that fetched it, before the read returns,
// instead of being copied into the write-behind queue. The copy cost more
// than the write itself on the 2-core build machine, where fresh memory is
// expensive (the pool's buffers are fresh again after each garbage
// collection empties it): a 512 MiB first load into an empty disk cache
// (Python read_into, a new process each, interleaved, median of 4) spent
// 2.26 s of CPU per GB with the copy and 1.25 s written through, against
// 0.36 s with no disk cache, and ran at 324 vs 478 MB/s. The write still
// overlaps the other blocks' GETs, which go on meanwhile.
//
// Tried and reverted (bench_remote --cases object --memtier-only, 256 MiB,
// base/new alternated, 3 rounds; perf put the buffered write at half of a
// first load's samples: pwrite's copy into fresh page-cache pages 18%,
// ext4 delayed allocation 13%, CRC 11%):
//   - O_DIRECT straight from the caller's buffer (an entry format with a
//     payload skew for unaligned buffers), the page cache warmed after
//     the read with posix_fadvise(WILLNEED): 0.88 vs 1.25 CPU s/GB at load
//     4, but at load 2.7 first loads of 744 vs 919 MB/s (the load waits
//     for the device, 1.3-1.8 GB/s) and second processes of 1196 vs 1804
//     MB/s (WILLNEED leaves order-0 pages; a buffered write, large folios);
//   - copying blocks into kept aligned buffers to write them behind the
//     read: the copy and the buffers' fresh pages cost what the write does;
//   - fallocate instead of a sparse Truncate in reserve: first loads 685
//     vs 556 MB/s (first-load children alone, 8 rounds) but 650 vs 678 in
//     bench_remote, and the second process at 0.91-0.92x the local file
//     against 0.95-1.14x (large folios lost, it seems).
//
// At most writeThroughSlots blocks are written through at a time, so a
// slow disk holds only that many fetching goroutines; a block that finds
// no slot within Options.QueueWait is dropped (left uncached, counted in
// QueueWaits and QueueDrops as a queue drop is), never fetched again: the
// bound the write-behind queue keeps, without its copy.
var writeThroughSlots = 4

// throughGate, when set (tests), runs before each write-through.
var throughGate func()

// slots is a counting semaphore of write-through slots.
type slots chan struct{}

// newSlots returns n slots, or nil (no write-through) for n <= 0.
func newSlots(n int) slots {
	if n <= 0 {
		return nil
	}
	return make(slots, n)
}

// acquire takes a slot, waiting at most wait, and reports whether it got
// one and whether it had to wait.
func (s slots) acquire(wait time.Duration) (ok, waited bool) {
	select {
	case s <- struct{}{}:
		return true, false
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case s <- struct{}{}:
		return true, true
	case <-t.C:
		return false, true
	}
}

func (s slots) release() { <-s }

// writeThrough writes data, the caller's block idx of k, from data itself
// (see above). While it writes, the block is listed as pending, so a read
// of it by another request meanwhile copies it from data (copyPending)
// instead of fetching it again; data stays the caller's and unchanged
// until this returns.
func (c *Cache) writeThrough(k *Key, idx uint64, data []byte) {
	ok, waited := c.wt.acquire(c.opts.QueueWait)
	if waited {
		c.st.queueWaits.Add(1)
	}
	if !ok {
		c.st.queueDrops.Add(1)
		return
	}
	defer c.wt.release()
	name := k.fileName(idx)
	listed := c.wb.addPending(name, job{k: *k, idx: idx, data: data})
	if throughGate != nil {
		throughGate()
	}
	c.put(k, idx, data)
	if listed {
		c.wb.removePending(name)
	}
	c.st.throughWrites.Add(1)
}
