package diskcache

import "sync"

// writer is the write-behind queue: blocks a read fetched wait here, as
// copies, for one background goroutine to write them, so the reader does
// not wait for the file system. The queue holds at most max payload bytes;
// a block that does not fit is refused (add reports false) and its reader
// writes it itself (Stats.InlineWrites): back-pressure, so a first run
// caches every block at the pace of the slower of the network and the
// disk, rather than leaving blocks for the next run to fetch again (with a
// dropping queue, 14 to 42 of 64 blocks were lost per 256 MiB read on the
// loaded 2-core build machine). The goroutine runs only while there is
// work, so an idle Cache holds none.
type writer struct {
	c   *Cache
	max int64

	mu      sync.Mutex
	q       []job
	queued  int64 // payload bytes in q and in the job being written
	running bool
	idle    *sync.Cond // signaled when the queue empties
}

type job struct {
	k    Key
	idx  uint64
	data []byte // owned by the job; returned to the pool after the write
}

func newWriter(c *Cache, max int64) *writer {
	w := &writer{c: c, max: max}
	w.idle = sync.NewCond(&w.mu)
	return w
}

// add queues data (ownership passes to the writer) as block idx of k and
// reports true, or reports false, keeping nothing, when the queue is full.
func (w *writer) add(k *Key, idx uint64, data []byte) bool {
	w.mu.Lock()
	if w.queued+int64(len(data)) > w.max {
		w.mu.Unlock()
		return false
	}
	w.q = append(w.q, job{*k, idx, data})
	w.queued += int64(len(data))
	if !w.running {
		w.running = true
		go w.run()
	}
	w.mu.Unlock()
	return true
}

func (w *writer) run() {
	w.mu.Lock()
	for len(w.q) > 0 {
		j := w.q[0]
		w.q[0] = job{}
		w.q = w.q[1:]
		w.mu.Unlock()
		w.c.put(&j.k, j.idx, j.data)
		w.c.putBuf(j.data)
		w.mu.Lock()
		w.queued -= int64(len(j.data))
	}
	w.q = nil
	w.running = false
	w.idle.Broadcast()
	w.mu.Unlock()
}

// flush waits until the queue is empty and no write is in progress.
func (w *writer) flush() {
	w.mu.Lock()
	for w.running {
		w.idle.Wait()
	}
	w.mu.Unlock()
}
