package diskcache

import (
	"os"

	"github.com/memtier/memtier/runtime/remote"
)

// Peek is what Source.Peek found for a range: the blocks a ReadAt of it
// would serve from the directory and those it would fetch, counted as
// Stats counts them (Stats.HitBlocks/HitBytes, MissBlocks/MissBytes).
type Peek struct {
	HitBlocks     uint64 // blocks whose entry is in the directory now, or waiting in the write-behind queue
	HitBytes      uint64 // bytes of the range those blocks hold (the requested part of each)
	MissBlocks    uint64 // blocks without an entry: a read fetches them remotely
	MissBytes     uint64 // bytes those fetches would bring, whole blocks
	PendingBlocks uint64 // of HitBlocks, those still in the write-behind queue (fetched moments ago)
}

// Peek reports which blocks of [off, off+n) of o the directory holds for
// o's version now, without reading or checking them: one lstat per block,
// no lock, no mtime refresh, no counter; a block waiting in the
// write-behind queue counts as held (a read is served from there). An entry that is present but
// corrupt counts as held (a read finds it out, drops and refetches it),
// and another process may add or evict entries right after. ok is false
// when the Cache is closed, the range is empty or past o's end, or o
// cannot be cached (no validator, see KeyOf): a read of it then goes to
// the remote source only. Safe for concurrent use.
func (s *Source) Peek(o *remote.Object, off, n uint64) (p Peek, ok bool) {
	size := o.Size()
	if s.c.closed.Load() || n == 0 || off > size || n > size-off {
		return p, false
	}
	k, ok := s.KeyOf(o)
	if !ok {
		return p, false
	}
	B := uint64(s.c.block)
	end := off + n
	for b := off / B; b <= (end-1)/B; b++ {
		lo, hi := s.span(b, size)
		name := k.fileName(b)
		pending := s.c.wb.isPending(name)
		if pending || lstatOK(s.c.path(name)) {
			p.HitBlocks++
			p.HitBytes += min(hi, end) - max(lo, off)
			if pending {
				p.PendingBlocks++
			}
		} else {
			p.MissBlocks++
			p.MissBytes += hi - lo
		}
	}
	return p, true
}

func lstatOK(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
