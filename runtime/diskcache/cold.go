package diskcache

import (
	"hash/crc32"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Cold fills (Source.ReadAtTiersCold): the blocks of a load whose bytes
// are in the caller's buffer, and are not expected back from the disk tier
// in this process soon (a whole object read into memory), are written
// behind the read, around the page cache, and the page cache is warmed
// from the entries later, when no read is in flight.
//
// Why: on the 2-core build machine (a VM whose guest hands freed memory
// back to the host) a buffered entry write spends most of its CPU taking
// fresh page-cache pages: perf of a 256 MiB first load put 51% of the
// process's samples in put (33% pwrite: copy_folio_from_iter_atomic 18%,
// ext4 write_begin 13%; 11% CRC), against 36% for the GETs themselves, and
// the first load cost 1.14 CPU s/GB against 0.37 with no disk cache. An
// O_DIRECT write costs the guest about 0.07 CPU s/GB (the device reads the
// buffer by DMA; measured 1.8 GB/s with 4 writes in flight), but needs
// memory aligned to the device's block, which a caller's buffer (numpy's
// is 16 bytes past a page) is not, and a caller's buffer is the caller's
// again once the read returns. So each fetched block is copied, its piece
// checksums computed in the same pass (copySummed), into one of a fixed
// set of aligned buffers kept for the Cache's life (coldBufs: the copy
// lands in memory touched before, never in fresh pages), queued in the
// write-behind queue (whose QueueBytes bound them: memory stays within
// parts in flight x part size + the cache budgets + 64 MiB), and written
// by up to coldWriters goroutines while the read goes on; the last blocks
// are written after it returns. Close writes every queued block first.
//
// An entry written around the page cache would be read from the device by
// the next process (about 0.2x a warm local file on the build machine), so
// each one is then read into the page cache with posix_fadvise(WILLNEED)
// (the kernel reads it asynchronously, by DMA), one entry at a time and
// only while no read of this Cache is in flight (warmer); Close finishes
// the list within warmCloseWait. A warm-up is a hint: one skipped leaves a
// valid entry that is read from the device.
//
// Crash safety is put's: the entry is written to a temporary file and
// renamed into place, so a process that exits or dies with blocks still
// queued leaves no entry for them (the next read fetches them), never a
// torn one.

// coldWriters bounds the goroutines writing cold blocks: O_DIRECT writes
// cost the CPU little and the device wants several in flight (1.3 GB/s
// with one, 1.8 GB/s with four on the build machine).
var coldWriters = 4

// warmCloseWait bounds how long Close spends warming entries still listed.
const warmCloseWait = 2 * time.Second

// maxWarm bounds the entry names waiting to be warmed (a hint: the oldest
// are forgotten past it).
const maxWarm = 1 << 14

// coldBufs is a Cache's kept buffers of cold blocks: block bytes each,
// aligned for O_DIRECT. At most max are kept free; the write-behind
// queue's byte bound bounds those in use.
type coldBufs struct {
	mu    sync.Mutex
	free  [][]byte
	max   int
	block int
	made  int // buffers allocated (tests)
}

// get returns a buffer of n bytes (n <= block), kept or new.
func (b *coldBufs) get(n int) []byte {
	b.mu.Lock()
	if k := len(b.free); k > 0 {
		p := b.free[k-1]
		b.free = b.free[:k-1]
		b.mu.Unlock()
		return p[:n]
	}
	b.made++
	b.mu.Unlock()
	return alignedBuf(b.block)[:n]
}

// put gives back a buffer from get.
func (b *coldBufs) put(p []byte) {
	p = p[:cap(p)]
	b.mu.Lock()
	if len(b.free) < b.max && len(p) == b.block {
		b.free = append(b.free, p)
	}
	b.mu.Unlock()
}

// drop forgets the kept buffers (Close).
func (b *coldBufs) drop() {
	b.mu.Lock()
	b.free = nil
	b.mu.Unlock()
}

// alignedBuf returns n bytes starting on a directAlign boundary (capacity n).
func alignedBuf(n int) []byte {
	p := make([]byte, n+directAlign)
	a := int(uintptr(unsafe.Pointer(unsafe.SliceData(p))) % directAlign)
	if a != 0 {
		a = directAlign - a
	}
	return p[a : a+n : a+n]
}

// copySummed copies src into dst (as long) and returns the piece
// checksums of src (pieceCRCs), one piece at a time, so that the copy
// reads what the checksum has just brought into the CPU cache.
func copySummed(dst, src []byte) []uint32 {
	crcs := make([]uint32, numPieces(len(src)))
	tab := sumTable(writeSum)
	for i := range crcs {
		lo, hi := i*pieceBytes, min((i+1)*pieceBytes, len(src))
		crcs[i] = crc32.Checksum(src[lo:hi], tab)
		copy(dst[lo:hi], src[lo:hi])
	}
	return crcs
}

// addCold queues a copy of src (block idx of k) as a cold job, waiting up
// to w.wait for room as add does, and says what it did (queuedNow,
// queuedWaited, dropped, tooLarge: then nothing was copied). src stays
// the caller's.
func (w *writer) addCold(k *Key, idx uint64, src []byte) int {
	need := int64(len(src))
	w.mu.Lock()
	if need > w.max {
		w.mu.Unlock()
		return tooLarge
	}
	outcome := queuedNow
	if w.queued+need > w.max {
		outcome = queuedWaited
		if !w.waitRoomLocked(need) {
			w.mu.Unlock()
			return dropped
		}
	}
	w.queued += need // room held while copying, outside the lock
	w.mu.Unlock()
	buf := w.c.cold.get(len(src))
	crcs := copySummed(buf, src)
	w.mu.Lock()
	w.enqueueLocked(job{k: *k, idx: idx, data: buf, cold: true, crcs: crcs}, coldWriters)
	w.mu.Unlock()
	return outcome
}

// writeCold writes cold job j (entry name) around the page cache and lists
// the entry for warming.
func (c *Cache) writeCold(j *job, name string) {
	if c.putEntry(&j.k, j.idx, j.data, j.crcs, true) {
		c.st.coldWrites.Add(1)
		c.warm.add(c, name)
	}
}

// directSlots bounds the cold blocks written straight from the caller's
// buffer at a time (storeColdWhole); 0: every cold block is copied.
var directSlots = 8

// storeColdWhole caches data, block idx of k and the caller's (a block the
// read covers whole), as a cold fill: written from data itself with
// O_DIRECT by this goroutine (putEntry's skew takes any alignment), while
// the other blocks' GETs go on, when one of directSlots is free; else
// copied into the queue (storeCold), whose writers write it after the
// read returns if need be. No copy and no fresh memory: the device reads
// the caller's pages. While it is written the block is listed as pending,
// so a concurrent read of it copies it from data.
func (s *Source) storeColdWhole(k *Key, idx uint64, data []byte) {
	c := s.c
	if c.opts.Synchronous || !c.dt.tryAcquire() {
		s.storeCold(k, idx, data)
		return
	}
	defer c.dt.release()
	crcs := pieceCRCs(data)
	name := k.fileName(idx)
	listed := c.wb.addPending(name, job{k: *k, idx: idx, data: data})
	if c.putEntry(k, idx, data, crcs, true) {
		c.st.coldWrites.Add(1)
		c.warm.add(c, name)
	}
	if listed {
		c.wb.removePending(name)
	}
}

// storeCold caches data, block idx of k, as a cold fill: a copy queued
// (addCold); written by the reader when larger than the whole queue, or
// always with Options.Synchronous. data stays the caller's.
func (s *Source) storeCold(k *Key, idx uint64, data []byte) {
	if s.c.opts.Synchronous {
		s.c.put(k, idx, data)
		return
	}
	switch s.c.wb.addCold(k, idx, data) {
	case queuedWaited:
		s.c.st.queueWaits.Add(1)
	case dropped:
		s.c.st.queueWaits.Add(1)
		s.c.st.queueDrops.Add(1)
	case tooLarge:
		s.c.st.inlineWrites.Add(1)
		s.c.put(k, idx, data)
	}
}

// warmer is the list of cold entries to read into the page cache, and the
// goroutine that does it while the Cache is idle.
type warmer struct {
	mu      sync.Mutex
	names   []string
	running bool
	stopped bool // set by finish: no goroutine starts again
	done    sync.WaitGroup
}

// add lists the entry name and starts the goroutine if none runs.
func (w *warmer) add(c *Cache, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.names) >= maxWarm {
		w.names = w.names[1:]
	}
	w.names = append(w.names, name)
	if !w.running && !w.stopped {
		w.running = true
		w.done.Add(1)
		go w.run(c)
	}
}

// next pops the oldest listed name ("" and the goroutine marked stopped
// when none).
func (w *warmer) next() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.names) == 0 {
		w.running = false
		return ""
	}
	n := w.names[0]
	w.names = w.names[1:]
	return n
}

// warmIdlePoll is how often the warmer looks whether reads have ended.
const warmIdlePoll = 2 * time.Millisecond

func (w *warmer) run(c *Cache) {
	defer w.done.Done()
	for {
		for c.busy.Load() > 0 && !c.closing.Load() {
			time.Sleep(warmIdlePoll)
		}
		if c.closing.Load() {
			w.mu.Lock()
			w.running = false
			w.mu.Unlock()
			return
		}
		name := w.next()
		if name == "" {
			return
		}
		c.warmOne(name)
	}
}

// finish (Close) stops the goroutine and warms what is still listed, until
// deadline; the rest stays as it is (valid entries, read from the device).
func (w *warmer) finish(c *Cache, deadline time.Time) {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.done.Wait() // c.closing is set: it stops after its current entry
	for time.Now().Before(deadline) {
		w.mu.Lock()
		if len(w.names) == 0 {
			w.mu.Unlock()
			return
		}
		name := w.names[0]
		w.names = w.names[1:]
		w.mu.Unlock()
		c.warmOne(name)
	}
	w.mu.Lock()
	w.names = nil
	w.mu.Unlock()
}

// warmOne asks the kernel to read the entry name into the page cache.
func (c *Cache) warmOne(name string) {
	f, err := os.Open(c.path(name))
	if err != nil {
		return // evicted or replaced meanwhile
	}
	if unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_WILLNEED) == nil {
		c.st.warmedEntries.Add(1)
	}
	f.Close()
}
