package diskcache

import (
	"sync"
	"time"
)

// writer is the write-behind queue: blocks a read fetched wait here, as
// copies, for one background goroutine to write them, so the reader does
// not wait for the file system. The queue holds at most max payload bytes.
//
// A block that does not fit waits for room (back-pressure), at most wait
// (Options.QueueWait); past that it is dropped, left uncached
// (Stats.QueueDrops), and the read goes on. Neither outcome fetches the
// block twice: the queue used to defer such a block and fetch it again
// after the read, which doubled its egress (paid per byte on S3) for the
// blocks of every read faster than the disk. Waiting keeps every block
// cached while the disk keeps up within the bound; dropping keeps a stalled
// disk from stalling the reads. A block larger than the whole queue never
// fits: its reader writes it (Stats.InlineWrites). Up to writeWorkers
// goroutines run, only while there is work, so an idle Cache holds none.
type writer struct {
	c    *Cache
	max  int64
	wait time.Duration

	mu      sync.Mutex
	q       []job // copied blocks, in the order queued
	queued  int64 // payload bytes in q and in the job being written
	workers int   // goroutines running run
	waiting int   // readers waiting for room (tests)
	// pending holds the payload of every block queued or being written,
	// by entry name, so a read of it meanwhile is served from memory
	// (copyPending) instead of fetched again: until its rename the entry
	// is not on disk, and a read that missed then would be a second GET of
	// the same bytes.
	pending map[string]job
	idle    *sync.Cond // signaled when the last worker exits
	room    *sync.Cond // signaled when a write ends (queued went down) or a wait expires
}

// writeWorkers bounds the goroutines writing. One: on 2 cores more writers
// took the CPU from the read they are meant to stay behind (a 512 MiB
// first run at 0.65-0.75x the remote rate with one, 0.33-0.57x with four),
// while the flush after it was 1.3-1.9 s with one and 0.9-1.4 s with four
// (BenchmarkDiskCacheVersitygw, DISKCACHE_BENCH_WRITERS).
var writeWorkers = 1

// writeGate, when set (tests), runs before each queued write: a test holds
// the writer there to fill the queue deterministically.
var writeGate func()

type job struct {
	k    Key
	idx  uint64
	data []byte // owned by the job; returned to the pool after the write
}

func newWriter(c *Cache, max int64, wait time.Duration) *writer {
	w := &writer{c: c, max: max, wait: wait}
	w.idle = sync.NewCond(&w.mu)
	w.room = sync.NewCond(&w.mu)
	return w
}

// Outcomes of add.
const (
	queuedNow    = iota // queued at once
	queuedWaited        // queued after waiting for room
	dropped             // no room within the wait: not queued, not written
	tooLarge            // larger than the whole queue: not queued
)

// add queues data (ownership passes to the writer when queued) as block
// idx of k, waiting up to w.wait for room, and says what it did (queuedNow,
// queuedWaited, dropped, tooLarge; the caller keeps data unless queued).
func (w *writer) add(k *Key, idx uint64, data []byte) int {
	need := int64(len(data))
	w.mu.Lock()
	defer w.mu.Unlock()
	if need > w.max {
		return tooLarge
	}
	outcome := queuedNow
	if w.queued+need > w.max {
		outcome = queuedWaited
		expired := false
		t := time.AfterFunc(w.wait, func() {
			w.mu.Lock()
			expired = true
			w.room.Broadcast()
			w.mu.Unlock()
		})
		w.waiting++
		for w.queued+need > w.max && !expired {
			w.room.Wait()
		}
		w.waiting--
		t.Stop()
		if w.queued+need > w.max {
			return dropped
		}
	}
	w.q = append(w.q, job{k: *k, idx: idx, data: data})
	w.queued += need
	if w.pending == nil {
		w.pending = make(map[string]job)
	}
	w.pending[k.fileName(idx)] = job{k: *k, idx: idx, data: data}
	if w.workers < writeWorkers && w.workers < len(w.q) {
		w.workers++
		go w.run()
	}
	return outcome
}

func (w *writer) run() {
	w.mu.Lock()
	for len(w.q) > 0 {
		j := w.q[0]
		w.q[0] = job{}
		w.q = w.q[1:]
		w.mu.Unlock()
		if writeGate != nil {
			writeGate()
		}
		w.c.put(&j.k, j.idx, j.data)
		w.mu.Lock()
		delete(w.pending, j.k.fileName(j.idx))
		w.mu.Unlock()
		w.c.putBuf(j.data)
		w.mu.Lock()
		w.queued -= int64(len(j.data))
		w.room.Broadcast()
	}
	w.workers--
	if w.workers == 0 {
		w.q = nil
		w.idle.Broadcast()
	}
	w.mu.Unlock()
}

// copyPending copies bytes [from, from+len(dst)) of block idx of k
// (blockLen bytes) into dst from the write-behind queue, if the block is
// queued or being written, and reports whether it did.
func (w *writer) copyPending(name string, k *Key, idx uint64, blockLen int, dst []byte, from int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	j, ok := w.pending[name]
	if !ok || j.idx != idx || j.k.ID != k.ID || j.k.Validator != k.Validator || j.k.Size != k.Size ||
		len(j.data) != blockLen || from < 0 || from+len(dst) > blockLen {
		return false
	}
	copy(dst, j.data[from:])
	return true
}

// addPending lists j as pending under name (a write-through) unless a
// job of that name is listed already (queued by another read), and reports
// whether it listed it.
func (w *writer) addPending(name string, j job) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.pending[name]; ok {
		return false
	}
	if w.pending == nil {
		w.pending = make(map[string]job)
	}
	w.pending[name] = j
	return true
}

// removePending drops name from the pending list.
func (w *writer) removePending(name string) {
	w.mu.Lock()
	delete(w.pending, name)
	w.mu.Unlock()
}

// isPending reports whether the entry name is queued or being written.
func (w *writer) isPending(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.pending[name]
	return ok
}

// flush waits until the queue is empty and no write is in progress.
func (w *writer) flush() {
	w.mu.Lock()
	for w.workers > 0 {
		w.idle.Wait()
	}
	w.mu.Unlock()
}
