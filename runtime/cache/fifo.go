package cache

// key names one block: the engine's file identity number and the block index
// (file offset / block size).
type key struct{ file, index uint64 }

// Queue membership of a block (Block.q), guarded by the shard mutex.
const (
	qNone  uint8 = iota // not linked (dropped or evicted)
	qSmall              // S: probationary FIFO
	qMain               // M: main FIFO
)

// fifo is an intrusive doubly linked FIFO of blocks through Block.prev/next.
// Not safe for concurrent use; the owning shard's mutex guards it.
type fifo struct {
	head, tail *Block
	n          int
}

func (f *fifo) pushBack(b *Block) {
	b.prev, b.next = f.tail, nil
	if f.tail != nil {
		f.tail.next = b
	} else {
		f.head = b
	}
	f.tail = b
	f.n++
}

func (f *fifo) remove(b *Block) {
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		f.head = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	} else {
		f.tail = b.prev
	}
	b.prev, b.next = nil, nil
	f.n--
}

func (f *fifo) popFront() *Block {
	b := f.head
	if b != nil {
		f.remove(b)
	}
	return b
}

// ghost is S3-FIFO's G: a bounded FIFO of keys (no data) recently evicted from
// S. A ring holds (key, seq) in insertion order; the map holds the live seq of
// each key, so removing a key is O(1) and leaves a stale ring slot that is
// skipped when it falls off the front. The ring length bounds the number of
// remembered keys. Not safe for concurrent use; guarded by the shard mutex.
type ghost struct {
	ring []ghostSlot
	head int // index of the oldest slot
	n    int // slots in use
	seq  uint64
	live map[key]uint64
}

type ghostSlot struct {
	k   key
	seq uint64
}

func newGhost(capacity int) ghost {
	return ghost{ring: make([]ghostSlot, capacity), live: make(map[key]uint64)}
}

// add remembers k, forgetting the oldest key when the ring is full.
func (g *ghost) add(k key) {
	if len(g.ring) == 0 {
		return
	}
	if g.n == len(g.ring) {
		old := g.ring[g.head]
		if s, ok := g.live[old.k]; ok && s == old.seq {
			delete(g.live, old.k)
		}
		g.head++
		if g.head == len(g.ring) {
			g.head = 0
		}
		g.n--
	}
	g.seq++
	i := g.head + g.n
	if i >= len(g.ring) {
		i -= len(g.ring)
	}
	g.ring[i] = ghostSlot{k: k, seq: g.seq}
	g.n++
	g.live[k] = g.seq
}

// take reports whether k is remembered and forgets it.
func (g *ghost) take(k key) bool {
	if _, ok := g.live[k]; !ok {
		return false
	}
	delete(g.live, k)
	return true
}

// reset forgets every key.
func (g *ghost) reset() {
	clear(g.ring)
	g.head, g.n = 0, 0
	clear(g.live)
}
