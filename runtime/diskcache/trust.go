package diskcache

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/files"
)

// Trust (see the package doc's "Trust" paragraph): a piece this process
// read and checked through a held entry descriptor is not checksummed
// again while a fstat of that descriptor shows the same identity as it
// did before the check and its bytes are still in the page cache.

// trustSettle: a check counts toward trust only when the entry's last
// change (ctime, mtime) is older than this when the check starts. The
// kernel stamps changes from a clock that advances in ticks (jiffies on
// older kernels), so a change in the same tick as the last one may leave
// the timestamps equal; a change after a check that starts this long
// after the entry's last change gets a timestamp of its own.
const trustSettle = 100 * time.Millisecond

// trustNow is the clock trustSettle is measured with (CLOCK_REALTIME, the
// one file timestamps are taken from); tests move it.
var trustNow = time.Now

// testNoTrust makes every Cache opened NoTrust: the package's TestMain
// sets it for the tests written for checked reads (exact bytes read,
// corruption found by a later read); the trust tests clear it.
var testNoTrust bool

// preadNoWait reads iov at off of fd only from the page cache: a page
// that would have to come from the device makes it fail (errNotResident,
// EAGAIN) or return short. RWF_NOWAIT alone does not promise that: it
// starts readahead for a missing page and succeeds when the device
// finishes it within the call, which a virtio disk backed by the host's
// page cache does (TestTrustDroppedPages saw it once in CI), so
// cachestat(2) (Linux 6.5+) first checks that every page of the range is
// cached. Without cachestat, RWF_NOWAIT is the check. Tests replace it.
var preadNoWait = func(fd int, iov [][]byte, off int64) (int, error) {
	n := 0
	for _, b := range iov {
		n += len(b)
	}
	if !allCached(fd, off, n) {
		return 0, errNotResident
	}
	for {
		n, err := unix.Preadv2(fd, iov, off, unix.RWF_NOWAIT)
		if !errors.Is(err, syscall.EINTR) {
			return n, err
		}
	}
}

// fstatID returns the identity of the entry file open as fd (the DRAM
// cache's files.Identity): any write, truncate or timestamp change (a
// utimensat, our own mtime refresh included) moves its ctime, and an
// unlink or rename of the file does too.
func fstatID(fd int) (files.Identity, bool) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return files.Identity{}, false
	}
	return files.IdentityOf(&st), true
}

// lastChange is when the file last changed: the later of ctime and mtime
// (a utimensat may set mtime ahead of the clock; such a file is not
// trusted until the clock passes it).
func lastChange(id files.Identity) time.Time { return time.Unix(0, max(id.MtimeNs, id.CtimeNs)) }

// trust is what this process checked of one held entry: the pieces read
// and checked (bits) after a fstat showed id. Safe for concurrent use.
type trust struct {
	mu   sync.Mutex
	id   files.Identity
	bits []uint64 // piece i at bit i%64 of bits[i/64]; nil: none
}

// snapshot returns the identity under which every piece each part
// overlaps was checked, or false when one of them was not. A read served
// from trust is taken after the snapshot and must be followed by a fstat
// that still shows id: then no change came between the checks' fstat and
// the read.
func (t *trust) snapshot(parts []part) (files.Identity, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bits == nil {
		return files.Identity{}, false
	}
	for _, pt := range parts {
		p0, p1 := pieceSpan(pt.from, len(pt.dst))
		for p := p0; p < p1; p++ {
			if p/64 >= len(t.bits) || t.bits[p/64]&(1<<(p%64)) == 0 {
				return files.Identity{}, false
			}
		}
	}
	return t.id, true
}

// record marks the pieces [p0, p1) of an entry of n pieces checked after
// a fstat showed id; pieces checked under another identity are forgotten.
func (t *trust) record(id files.Identity, n, p0, p1 int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bits == nil || t.id != id {
		t.id = id
		t.bits = make([]uint64, (n+63)/64)
	}
	for p := p0; p < p1 && p/64 < len(t.bits); p++ {
		t.bits[p/64] |= 1 << (p % 64)
	}
}

// settled reports whether a check that started at t0 after a fstat that
// showed id counts toward trust (trustSettle).
func settled(t0 time.Time, id files.Identity) bool { return t0.Sub(lastChange(id)) > trustSettle }

// trustedParts fills each part's dst with its payload bytes of e from
// trust: only when each piece they overlap was checked under the identity
// a fstat shows after the reads, and the page cache held every byte (one
// preadv2 per run of parts, the gaps between parts closer than a piece
// into scratch). Otherwise it returns false with the identity of that
// fstat (idOK false when there was none), for the checked read that
// follows; the dsts may be partly written.
func (c *Cache) trustedParts(e *openEntry, parts []part) (served bool, id files.Identity, idOK bool) {
	want, ok := e.tr.snapshot(parts)
	if !ok {
		return false, files.Identity{}, false
	}
	fd := int(e.f.Fd())
	base := int64(e.h.hdrLen)
	sp := partScratch.Get().(*partBufs)
	defer func() {
		clear(sp.iov[:cap(sp.iov)])
		partScratch.Put(sp)
	}()
	var read uint64
	var err error
	for i := 0; i < len(parts) && err == nil; {
		iov, scratch := sp.iov[:0], sp.scratch[:0]
		start, pos, total := parts[i].from, parts[i].from, 0
		for ; i < len(parts); i++ {
			p := parts[i]
			gap := p.from - pos
			if gap > pieceBytes || len(scratch)+gap > cap(scratch) || len(iov)+2 > maxIOV {
				break
			}
			if gap > 0 {
				iov, scratch = appendScratch(iov, scratch, gap)
			}
			iov = append(iov, p.dst)
			pos, total = p.from+len(p.dst), total+gap+len(p.dst)
		}
		var n int
		n, err = preadNoWait(fd, iov, base+int64(start))
		sp.iov = iov[:0]
		if n > 0 {
			read += uint64(n)
		}
		if err == nil && n != total {
			err = errShortNoWait
		}
	}
	id, idOK = fstatID(fd)
	if err == nil && idOK && id == want {
		pieces, last := 0, -1
		for _, p := range parts {
			p0, p1 := pieceSpan(p.from, len(p.dst))
			pieces += p1 - max(p0, last+1)
			last = p1 - 1
		}
		c.st.readBytes.Add(read)
		c.st.trustedPieces.Add(uint64(pieces))
		return true, id, true
	}
	c.noteTrustMiss(err)
	return false, id, idOK
}

// errShortNoWait: a RWF_NOWAIT read returned short (part of the range is
// not in the page cache).
var errShortNoWait = errors.New("short RWF_NOWAIT read")

// errNotResident: cachestat found a page of the range not in the page
// cache.
var errNotResident = errors.New("range not all in the page cache")

// noCachestat is set once cachestat(2) is found missing (ENOSYS: a
// kernel before 6.5) or refused; RWF_NOWAIT is then the only check.
var noCachestat atomic.Bool

var pageBytes = uint64(os.Getpagesize())

// cachestatTries: cachestat(2) undercounts a range now and then while
// other readers of the same file add pages next to it (clean pages of a
// range this process had just read counted 7 of 26, the next call all
// 26): TestTrustConcurrentReaders fell back in 3 of 100 runs with one
// call here, in none of 200 with three. A range really out of the page
// cache costs two more calls (about a microsecond) before its checked
// read from the device.
const cachestatTries = 3

// allCached reports whether every page of [off, off+n) of fd is in the
// page cache (true also when cachestat cannot tell: see noCachestat).
func allCached(fd int, off int64, n int) bool {
	if n <= 0 || noCachestat.Load() {
		return true
	}
	first, last := uint64(off)/pageBytes, (uint64(off)+uint64(n)-1)/pageBytes
	r := unix.CachestatRange{Off: first * pageBytes, Len: (last - first + 1) * pageBytes}
	var cs unix.Cachestat_t
	for range cachestatTries {
		if err := unix.Cachestat(uint(fd), &r, &cs, 0); err != nil {
			if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPERM) {
				noCachestat.Store(true)
				return true
			}
			return false // EINTR, EBADF...: read it checked
		}
		if cs.Cache >= last-first+1 {
			return true
		}
	}
	return false
}

// noteTrustMiss counts a read that trust could not serve; a file system
// that refuses RWF_NOWAIT turns trust off for the Cache (every trusted
// read would fall back).
func (c *Cache) noteTrustMiss(err error) {
	c.st.trustFallbacks.Add(1)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		c.trustOff.Store(true)
	}
}

// pieceSpan returns the pieces [p0, p1) that payload bytes [from, from+n)
// overlap (n > 0).
func pieceSpan(from, n int) (p0, p1 int) { return from / pieceBytes, (from+n-1)/pieceBytes + 1 }

// trusting reports whether reads of this Cache may be served from trust.
func (c *Cache) trusting() bool { return !c.opts.NoTrust && !c.trustOff.Load() }

// readRange is readPieces for get, with readTrusting's use of trust.
func (c *Cache) readRange(e *openEntry, from int, dst []byte) string {
	checked := func() string { return readPieces(e.f, int64(e.h.hdrLen), &e.h, from, dst, &c.st.readBytes) }
	if len(dst) == 0 {
		return checked()
	}
	parts := [1]part{{from: from, dst: dst}}
	return c.readTrusting(e, parts[:], checked)
}

// readPartsTrust is readParts for getParts, with readTrusting's use of trust.
func (c *Cache) readPartsTrust(e *openEntry, parts []part) string {
	return c.readTrusting(e, parts, func() string {
		return readParts(e.f, int64(e.h.hdrLen), &e.h, parts, &c.st.readBytes)
	})
}

// readTrusting serves parts of e from trust when it can (trustedParts),
// else by checked (which reads and checks them), and then records their
// pieces as checked when the entry had settled (trustSettle).
func (c *Cache) readTrusting(e *openEntry, parts []part, checked func() string) string {
	if !c.trusting() {
		return checked()
	}
	t0 := trustNow()
	served, id, ok := c.trustedParts(e, parts)
	if served {
		return ""
	}
	if !ok {
		id, ok = fstatID(int(e.f.Fd()))
	}
	why := checked()
	if why == "" && ok && settled(t0, id) {
		for _, p := range parts {
			p0, p1 := pieceSpan(p.from, len(p.dst))
			e.tr.record(id, len(e.h.crcs), p0, p1)
		}
	}
	return why
}
