package diskcache

import "sync"

// writer is the write-behind queue: blocks a read fetched wait here, as
// copies, for one background goroutine to write them, so the reader does
// not wait for the file system. The queue holds at most max payload bytes.
// A block that does not fit is not written by its reader (that put the
// disk on the read's critical path: a first run of 512 MiB read at 0.3x
// the remote rate, BenchmarkDiskCacheVersitygw) and not dropped either
// (a dropping queue lost 14 to 42 of 64 blocks per 256 MiB read on the
// loaded 2-core build machine): it is deferred, kept as what to fetch
// (no bytes), and the goroutine fetches it again from the remote source
// and writes it once no copied block and no read waits (Stats.DeferredBlocks). A first
// run so returns at the network's pace, memory stays bounded by max, and
// every block is cached by the time Flush returns. Up to writeWorkers
// goroutines run, only while there is work, so an idle Cache holds none.
type writer struct {
	c   *Cache
	max int64

	mu      sync.Mutex
	q       []job      // copied blocks, written first
	later   []job      // deferred blocks (fill set, no data)
	queued  int64      // payload bytes in q and in the job being written
	workers int        // goroutines running run
	reads   int        // Source.ReadAt calls in progress
	idle    *sync.Cond // signaled when the last worker exits
	wake    *sync.Cond // signaled when a block is queued or the last read ends
}

// writeWorkers bounds the goroutines writing (and fetching deferred
// blocks). One: on 2 cores more writers took the CPU from the read they
// are meant to stay behind (a 512 MiB first run at 0.65-0.75x the remote
// rate with one, 0.33-0.57x with four), while the flush after it was
// 1.3-1.9 s with one and 0.9-1.4 s with four (BenchmarkDiskCacheVersitygw,
// DISKCACHE_BENCH_WRITERS).
var writeWorkers = 1

// maxDeferred bounds the deferred blocks remembered (about 100 bytes
// each); past it a block is written by its reader, as before deferral.
const maxDeferred = 1 << 16

type job struct {
	k    Key
	idx  uint64
	data []byte // owned by the job; returned to the pool after the write
	// fill, for a deferred block, fetches its n bytes into the buffer
	// given (from the remote source, pinned to the version read).
	fill func([]byte) error
	n    int
}

func newWriter(c *Cache, max int64) *writer {
	w := &writer{c: c, max: max}
	w.idle = sync.NewCond(&w.mu)
	w.wake = sync.NewCond(&w.mu)
	return w
}

// add queues data (ownership passes to the writer) as block idx of k and
// reports true, or reports false, keeping nothing, when the queue is full.
func (w *writer) add(k *Key, idx uint64, data []byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queued+int64(len(data)) > w.max {
		return false
	}
	w.q = append(w.q, job{k: *k, idx: idx, data: data})
	w.queued += int64(len(data))
	w.wake.Broadcast()
	w.startLocked()
	return true
}

// deferBlock queues block idx of k (n bytes) to be fetched by fill and
// written after the copied blocks, and reports true, or false when
// maxDeferred blocks already wait.
func (w *writer) deferBlock(k *Key, idx uint64, n int, fill func([]byte) error) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.later) >= maxDeferred {
		return false
	}
	w.later = append(w.later, job{k: *k, idx: idx, fill: fill, n: n})
	w.startLocked()
	return true
}

// startLocked starts a worker unless writeWorkers run or every waiting
// job already has one.
func (w *writer) startLocked() {
	if w.workers < writeWorkers && w.workers < len(w.q)+len(w.later) {
		w.workers++
		go w.run()
	}
}

// readStart and readEnd bracket a Source.ReadAt: deferred blocks wait
// while any read runs, so that their GETs do not take the network and the
// CPU from the reads they were deferred for.
func (w *writer) readStart() {
	w.mu.Lock()
	w.reads++
	w.mu.Unlock()
}

func (w *writer) readEnd() {
	w.mu.Lock()
	if w.reads--; w.reads == 0 {
		w.wake.Broadcast()
	}
	w.mu.Unlock()
}

func (w *writer) run() {
	w.mu.Lock()
	for len(w.q) > 0 || len(w.later) > 0 {
		var j job
		if len(w.q) > 0 {
			j = w.q[0]
			w.q[0] = job{}
			w.q = w.q[1:]
		} else if w.reads > 0 {
			w.wake.Wait()
			continue
		} else {
			j = w.later[0]
			w.later[0] = job{}
			w.later = w.later[1:]
		}
		w.mu.Unlock()
		if j.fill != nil {
			w.c.fillAndPut(&j)
		} else {
			w.c.put(&j.k, j.idx, j.data)
			w.c.putBuf(j.data)
		}
		w.mu.Lock()
		w.queued -= int64(len(j.data))
	}
	w.workers--
	if w.workers == 0 {
		w.q, w.later = nil, nil
		w.idle.Broadcast()
	}
	w.mu.Unlock()
}

// fillAndPut fetches a deferred block into a pool buffer and writes it,
// unless the entry exists by now (another reader or process wrote it) or
// the Cache is closed. A failed fetch (the object changed, the network)
// only leaves the block uncached: the read that deferred it was served.
func (c *Cache) fillAndPut(j *job) {
	if c.closed.Load() || c.has(&j.k, j.idx) {
		return
	}
	buf := c.getBuf(j.n)
	defer c.putBuf(buf)
	if err := j.fill(buf); err != nil {
		c.st.deferredFailures.Add(1)
		return
	}
	c.put(&j.k, j.idx, buf)
}

// flush waits until both queues are empty and no write is in progress
// (deferred blocks wait for the reads in progress to end first).
func (w *writer) flush() {
	w.mu.Lock()
	for w.workers > 0 {
		w.idle.Wait()
	}
	w.mu.Unlock()
}
