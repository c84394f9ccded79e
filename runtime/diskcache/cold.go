package diskcache

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Cold fills (Source.ReadAtTiersCold): the blocks of a load whose bytes
// are in the caller's buffer, and are not expected back from the disk tier
// in this process soon (a whole object read into memory), are written
// around the page cache, straight from the caller's buffer, and the page
// cache is warmed from the entries later, when no read is in flight.
//
// Why: on the 2-core build machine (a VM whose guest hands freed memory
// back to the host) a buffered entry write spends most of its CPU taking
// fresh page-cache pages: perf of a 256 MiB first load put 51% of the
// process's samples in put (33% pwrite: copy_folio_from_iter_atomic 18%,
// ext4 write_begin 13%; 11% CRC), against 36% for the GETs themselves, and
// the first load cost 1.14 CPU s/GB against 0.37 with no disk cache. An
// O_DIRECT write costs the guest about 0.07 CPU s/GB (the device reads the
// caller's pages by DMA; 1.8 GB/s with 4 writes in flight). It needs an
// aligned address, which a caller's buffer (numpy's is 16 bytes past a
// page) is not: the entry's payload then starts S bytes after its header,
// S the block's address mod directAlign (the skew, entry.go), so the
// block's bytes from its first aligned address on land at an aligned file
// offset. Measured (256 MiB first loads, new process each, load 4): 0.88
// CPU s/GB against 1.25 with buffered write-through, 615 against 521 MB/s.
// Copying the blocks into aligned buffers instead, to write them behind
// the read, cost as much as the buffered write (the copy, and fresh pages
// for the buffers), so a block that finds no direct slot is written
// through buffered as before (Source.store), which also bounds what a
// slow device can cost a load.
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
// renamed into place, so a process that dies mid-write leaves no entry
// for the block (the next read fetches it), never a torn one.

// warmCloseWait bounds how long Close spends warming entries still listed.
const warmCloseWait = 2 * time.Second

// maxWarm bounds the entry names waiting to be warmed (a hint: the oldest
// are forgotten past it).
const maxWarm = 1 << 14

// directSlots bounds the cold blocks written straight from the caller's
// buffer at a time (storeColdWhole); 0: none (every block is written
// through buffered).
var directSlots = 8

// storeColdWhole caches data, block idx of k and the caller's (a block the
// read covers whole), as a cold fill: written from data itself with
// O_DIRECT by this goroutine (putEntry's skew takes any alignment), while
// the other blocks' GETs go on, when one of directSlots is free; else as
// store caches a borrowed block (buffered write-through). No copy and no
// fresh memory: the device reads the caller's pages. While it is written
// the block is listed as pending, so a concurrent read of it copies it
// from data.
func (s *Source) storeColdWhole(k *Key, idx uint64, data []byte) {
	c := s.c
	if c.opts.Synchronous || !c.dt.tryAcquire() {
		s.store(k, idx, data, true)
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
// WILLNEED reads it asynchronously into order-0 pages: the next process's
// copy out of them cost 0.080 CPU s per 252 MiB against 0.066 from the
// large folios a buffered write leaves (measured on the build machine; a
// buffered read into a scratch buffer, 0.091, and MADV_POPULATE_READ of
// a MADV_HUGEPAGE mapping, slower still, did not do better), far less
// than the buffered write costs the first load.
func (c *Cache) warmOne(name string) {
	f, err := os.Open(c.path(name))
	if err != nil {
		return // evicted or replaced meanwhile
	}
	defer f.Close()
	if unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_WILLNEED) == nil {
		c.st.warmedEntries.Add(1)
	}
}
