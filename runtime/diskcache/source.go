package diskcache

import (
	"sync"
	"time"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/source"
)

var _ source.Source = (*Source)(nil)

// Source is a remote.Source with a Cache in front of its reads: ReadAt
// serves the blocks the directory holds for the Object's version and
// fetches only the missing blocks, whole, as ranged GETs, then caches them
// (written through from the caller's buffer, or write-behind; see store).
// Open, and every Object, are the remote Source's, so the DRAM cache above
// keys blocks by the same Object.Version. Safe for concurrent use.
type Source struct {
	r *remote.Source
	c *Cache
}

// NewSource returns r with c in front of its reads. c stays the caller's
// to Close.
func NewSource(r *remote.Source, c *Cache) *Source { return &Source{r: r, c: c} }

// Remote returns the wrapped remote Source.
func (s *Source) Remote() *remote.Source { return s.r }

// Cache returns the Cache (for its Stats).
func (s *Source) Cache() *Cache { return s.c }

// Open is remote.Source.Open: it costs one GET (or none within trust) and
// tells the validator that binds the cached blocks.
func (s *Source) Open(name string, trust time.Duration) (source.Object, uint64, error) {
	return s.r.Open(name, trust)
}

// KeyOf returns the cache key of o: its Client's address and its ETag
// (else Last-Modified). ok is false for an object that cannot be cached:
// no validator (nothing would tell an overwrite), or a key too long.
func (s *Source) KeyOf(o *remote.Object) (Key, bool) {
	val := ""
	if e := o.ETag(); e != "" {
		val = "etag:" + e
	} else if lm := o.LastModified(); lm != "" {
		val = "lm:" + lm
	}
	k, err := NewKey(s.r.Client().Address(o.Location()), val, o.Size())
	return k, err == nil
}

// ReadAt fills dst with the bytes of o at off: blocks on disk are read and
// checked (ReadWorkers at a time), and only the missing blocks are fetched
// from the remote Source, whole, one ranged GET each (see fetchRun). path is ignored; PathBuffered is reported. Errors
// are the remote Source's (errs.EOF past the end; the GET's failure).
func (s *Source) ReadAt(o source.Object, dst []byte, off uint64, path int) (int, error) {
	if _, err := s.ReadAtTiers(o, dst, off); err != nil {
		return 0, err
	}
	return source.PathBuffered, nil
}

// ReadAtTiers is ReadAt that also returns fetched, the bytes of the blocks
// under dst that came from the remote source (whole blocks; 0 when the disk
// served every byte). The engine admits a run into the DRAM cache only when
// fetched is 0 (walk.go fillRun): a block fetched now is on its way to the
// disk tier, and its next read copies it from there into DRAM, so a first
// load touches no DRAM-cache memory of its own. Errors are ReadAt's.
func (s *Source) ReadAtTiers(o source.Object, dst []byte, off uint64) (fetched uint64, err error) {
	ro, ok := o.(*remote.Object)
	if !ok {
		return 0, errs.New(errs.Internal, "disk cache read", "object %q is not from a remote.Source", o.Name())
	}
	n := uint64(len(dst))
	size := ro.Size()
	if n == 0 || off > size || n > size-off {
		_, err := s.r.ReadAt(o, dst, off, source.PathBuffered)
		return n, err
	}
	k, ok := s.KeyOf(ro)
	if !ok {
		_, err := s.r.ReadAt(o, dst, off, source.PathBuffered)
		return n, err
	}
	B := uint64(s.c.block)
	first, last := off/B, (off+n-1)/B
	hit := make([]bool, last-first+1)
	s.readHits(&k, ro, dst, off, first, hit)

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for i := 0; i < len(hit); {
		if hit[i] {
			i++
			continue
		}
		j := i
		for j+1 < len(hit) && !hit[j+1] {
			j++
		}
		lo, _ := s.span(first+uint64(i), size)
		_, hi := s.span(first+uint64(j), size)
		fetched += hi - lo
		wg.Add(1)
		go func(b0, b1 uint64) {
			defer wg.Done()
			if err := s.fetchRun(&k, ro, dst, off, b0, b1); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}(first+uint64(i), first+uint64(j))
		i = j + 1
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return fetched, nil
}

// span returns block idx's range [lo, hi) in the object of size bytes.
func (s *Source) span(idx, size uint64) (lo, hi uint64) {
	B := uint64(s.c.block)
	return idx * B, min((idx+1)*B, size)
}

// readHits fills hit[i] (block first+i) with whether the disk served it
// into dst (which holds the object's bytes from off).
func (s *Source) readHits(k *Key, ro *remote.Object, dst []byte, off, first uint64, hit []bool) {
	end := off + uint64(len(dst))
	one := func(i int) {
		lo, hi := s.span(first+uint64(i), ro.Size())
		// Only the part of the block dst needs is read (and checked).
		a, b := max(lo, off), min(hi, end)
		hit[i] = s.c.get(k, first+uint64(i), int(hi-lo), dst[a-off:b-off], int(a-lo))
		if hit[i] {
			s.c.st.hitBlocks.Add(1)
			s.c.st.hitBytes.Add(b - a)
		}
	}
	workers := min(len(hit), s.c.opts.ReadWorkers)
	if workers <= 1 {
		for i := range hit {
			one(i)
		}
		return
	}
	var next sync.Mutex
	var wg sync.WaitGroup
	i := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				my := i
				i++
				next.Unlock()
				if my >= len(hit) {
					return
				}
				one(my)
			}
		}()
	}
	wg.Wait()
}

// fetchRun fetches blocks [b0, b1] whole from the remote source, one
// ranged GET per block (a block is at most a part), as many at a time
// as the remote client's MaxConcurrency (its limiter caps all callers
// together): a block dst covers whole lands straight in dst, a first or last
// block it covers only in part in a buffer of its own. Each block goes to
// the cache as soon as it lands, so writing overlaps the other blocks'
// GETs instead of following them all.
func (s *Source) fetchRun(k *Key, ro *remote.Object, dst []byte, off, b0, b1 uint64) error {
	end := off + uint64(len(dst))
	nb := int(b1 - b0 + 1)
	var (
		mu       sync.Mutex
		next     int
		firstErr error
		wg       sync.WaitGroup
	)
	one := func(b uint64) error {
		lo, hi := s.span(b, ro.Size())
		whole := lo >= off && hi <= end
		var d []byte
		if whole {
			d = dst[lo-off : hi-off]
		} else {
			d = s.c.getBuf(int(hi - lo))
		}
		if _, err := s.r.ReadAt(ro, d, lo, source.PathBuffered); err != nil {
			if !whole {
				s.c.putBuf(d)
			}
			return err
		}
		if !whole {
			a, z := max(lo, off), min(hi, end)
			copy(dst[a-off:z-off], d[a-lo:z-lo])
		}
		s.c.st.missBlocks.Add(1)
		s.c.st.missBytes.Add(hi - lo)
		s.store(k, b, d, whole)
		return nil
	}
	for range min(nb, s.r.Client().Options().MaxConcurrency) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := i >= nb || firstErr != nil
				mu.Unlock()
				if stop {
					return
				}
				if err := one(b0 + uint64(i)); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// store caches data (block idx of k, at lo in ro): written now
// (Synchronous); written from data itself when data is the caller's
// (borrowed) and a write-through slot frees within Options.QueueWait
// (writeThrough); else queued for the write-behind goroutine, as a copy when
// borrowed, else as is. A full queue makes the reader wait for room, at most
// Options.QueueWait, then the block is dropped (writer); a block larger than
// the queue is written here.
func (s *Source) store(k *Key, idx uint64, data []byte, borrowed bool) {
	if s.c.opts.Synchronous {
		s.c.put(k, idx, data)
		if !borrowed {
			s.c.putBuf(data)
		}
		return
	}
	if borrowed && s.c.wt != nil {
		s.c.writeThrough(k, idx, data)
		return
	}
	if borrowed {
		cp := s.c.getBuf(len(data))
		copy(cp, data)
		data = cp
	}
	switch s.c.wb.add(k, idx, data) {
	case queuedNow:
		return
	case queuedWaited:
		s.c.st.queueWaits.Add(1)
		return
	case dropped:
		s.c.st.queueWaits.Add(1)
		s.c.st.queueDrops.Add(1)
	case tooLarge:
		s.c.st.inlineWrites.Add(1)
		s.c.put(k, idx, data)
	}
	s.c.putBuf(data)
}

// ReadNoWait reports false: even a block on disk may wait for the device.
func (s *Source) ReadNoWait(o source.Object, dst []byte, off uint64) bool { return false }

// Resident is the remote Source's answer (nothing is in a page cache in
// front of a remote object as such).
func (s *Source) Resident(o source.Object, off, size uint64, samples int) (uint64, bool) {
	return s.r.Resident(o, off, size, samples)
}

// DirectRefused reports false, like the remote Source.
func (s *Source) DirectRefused(o source.Object) bool { return false }
