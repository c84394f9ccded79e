package hitidx

import (
	"sync/atomic"
	"unsafe"
)

// FileInfo is what the file table says of one open File.
type FileInfo struct {
	Path             string
	Version          uint64 // files.File.ID (never 0)
	FD               int
	Size             int64
	Dev, Ino         uint64
	MtimeNs, CtimeNs int64
	Resolved         int64 // files clock, ns
	Checked          int64 // files clock, ns
}

func (x *Index) fileEntry(path string) unsafe.Pointer {
	return unsafe.Add(x.files, uintptr(PathHash(path)&x.fmask)*FileEntry)
}

// owns reports whether entry e describes the File (version, fd); e's writer
// lock is held or the caller accepts a racy answer.
func (x *Index) owns(e unsafe.Pointer, version uint64, fd int) bool {
	return x.u64(e, FileVersion).Load() == version && int(int32(x.u64(e, FileFD).Load())) == fd
}

// PutFile makes fi the entry of its path's slot (a File entering the
// descriptor table). A path longer than MaxPath is not indexed (C asks Go).
func (x *Index) PutFile(fi *FileInfo) {
	if len(fi.Path) == 0 || len(fi.Path) > MaxPath || fi.Version == 0 {
		return
	}
	e := x.fileEntry(fi.Path)
	seq := x.u64(e, FileSeq)
	s := lock(seq)
	x.u64(e, FileVersion).Store(fi.Version)
	x.u64(e, FileSize).Store(uint64(fi.Size))
	x.u64(e, FileDev).Store(fi.Dev)
	x.u64(e, FileIno).Store(fi.Ino)
	x.u64(e, FileMtime).Store(uint64(fi.MtimeNs))
	x.u64(e, FileCtime).Store(uint64(fi.CtimeNs))
	x.u64(e, FileResolved).Store(uint64(fi.Resolved))
	x.u64(e, FileChecked).Store(uint64(fi.Checked))
	x.u64(e, FileFD).Store(uint64(uint32(int32(fi.FD))))
	x.u64(e, FilePathLen).Store(uint64(len(fi.Path)))
	x.u64(e, FileTouched).Store(0)
	// The path bytes are read by C only between two equal even sequence
	// values, so plain stores are enough; they are written a word at a time.
	dst := unsafe.Slice((*byte)(unsafe.Add(e, FilePath)), MaxPath+1)
	n := copy(dst, fi.Path)
	dst[n] = 0
	seq.Store(s + 2)
}

// DropFile empties path's slot if it still describes the File (version,
// fd). Called before the File's descriptor can be closed.
func (x *Index) DropFile(path string, version uint64, fd int) {
	if len(path) == 0 || len(path) > MaxPath {
		return
	}
	e := x.fileEntry(path)
	seq := x.u64(e, FileSeq)
	s := lock(seq)
	if x.owns(e, version, fd) {
		x.u64(e, FileVersion).Store(0)
		x.u64(e, FilePathLen).Store(0)
	}
	seq.Store(s + 2)
}

// FileTimes updates the check times of the File's entry (no sequence bump:
// each is one word, and C reads them after it has matched the entry).
func (x *Index) FileTimes(path string, version uint64, fd int, resolved, checked int64) {
	if len(path) == 0 || len(path) > MaxPath {
		return
	}
	e := x.fileEntry(path)
	if x.owns(e, version, fd) {
		x.u64(e, FileResolved).Store(uint64(resolved))
		x.u64(e, FileChecked).Store(uint64(checked))
	}
}

// FileUsed reports whether C served a hit of the File since the last call,
// and clears the mark.
func (x *Index) FileUsed(path string, version uint64, fd int) bool {
	if len(path) == 0 || len(path) > MaxPath {
		return false
	}
	e := x.fileEntry(path)
	t := x.u64(e, FileTouched)
	return x.owns(e, version, fd) && t.Load() != 0 && t.Swap(0) != 0
}

// The block table is 2-way set associative: a block lives in one of the two
// entries of the pair its key hashes to (capi/hit.c probes both), so two hot
// blocks whose keys collide do not evict each other from it.

// BlockSlot is the first entry of the pair of block (file, index); capi/hit.c
// computes the same (runtime/cache's mix64 of the hint slot).
func BlockSlot(file, index, mask uint64) uint64 { return blockHash(file, index) & mask &^ 1 }

// HintSlot is the address hint slot of block (file, index) (capi/hit.c
// computes the same): other bits of the hash than BlockSlot's lowest.
func HintSlot(file, index, mask uint64) uint64 { return blockHash(file, index) >> 1 & mask }

// HintTag is the tag of block (file, index) in its hint's low 12 bits: the
// hash's top bits, which neither slot uses below 2^51 slots.
func HintTag(file, index uint64) uint64 { return blockHash(file, index) >> 52 }

// hintTagMask covers the tag: block addresses are page aligned (4096).
const hintTagMask = 1<<12 - 1

func blockHash(file, index uint64) uint64 {
	x := file ^ index*0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func (x *Index) pair(file, index uint64) (e0, e1 unsafe.Pointer) {
	e0 = unsafe.Add(x.blocks, uintptr(BlockSlot(file, index, x.bmask))*BlockEntry)
	return e0, unsafe.Add(e0, BlockEntry)
}

// lockPair takes both entries' writer locks (always e0 first).
func (x *Index) lockPair(e0, e1 unsafe.Pointer) {
	lock(x.u64(e0, BlockSeq))
	lock(x.u64(e1, BlockSeq))
}

// unlockPair releases both entries with new sequence values: the next two
// of the region's stamp, not s + 2, so that no two writes of any entries
// leave the same value (see HintEntry). Returns e0's and e1's.
func (x *Index) unlockPair(e0, e1 unsafe.Pointer) (v0, v1 uint64) {
	n := x.stamp.Add(4) // even: the stamp starts at 0
	v0, v1 = n, n-2
	x.u64(e1, BlockSeq).Store(v1)
	x.u64(e0, BlockSeq).Store(v0)
	return v0, v1
}

// setHint makes block (file, index) at addr, whose entry's sequence value is
// now v, the hint of its slot. An address that is not page aligned has no
// room for the tag: no prediction.
func (x *Index) setHint(file, index uint64, addr uintptr, v uint64) {
	h := x.hintOf(file, index)
	if addr&hintTagMask != 0 {
		h.Store(0)
		return
	}
	// The stamp first: C reading the new address with the old stamp (or the
	// other way round) finds an entry that disagrees with one of them.
	x.u64(unsafe.Pointer(h), HintStamp).Store(v)
	h.Store(uint64(addr) | HintTag(file, index))
}

// hintOf is the first word of block (file, index)'s hint slot.
func (x *Index) hintOf(file, index uint64) *atomic.Uint64 {
	return x.u64(x.hints, uintptr(HintSlot(file, index, x.hmask))*HintEntry)
}

func (x *Index) hasKey(e unsafe.Pointer, file, index uint64) bool {
	return x.u64(e, BlockFile).Load() == file && x.u64(e, BlockIndex).Load() == index
}

func (x *Index) ownsBlock(e unsafe.Pointer, file, index uint64, addr uintptr) bool {
	return x.hasKey(e, file, index) && x.u64(e, BlockAddr).Load() == uint64(addr)
}

// Claim makes block (file, index) at addr, with the valid pages given, an
// entry of its pair: the one that already has its key, else an empty one,
// else the one C did not hit since eviction last looked (else the first).
func (x *Index) Claim(file, index uint64, addr uintptr, valid uint64) {
	e0, e1 := x.pair(file, index)
	x.lockPair(e0, e1)
	e := e0
	switch {
	case x.hasKey(e0, file, index):
	case x.hasKey(e1, file, index):
		e = e1
	case x.u64(e0, BlockFile).Load() == 0:
	case x.u64(e1, BlockFile).Load() == 0:
		e = e1
	case x.u64(e0, BlockRef).Load() != 0 && x.u64(e1, BlockRef).Load() == 0:
		e = e1
	}
	x.u64(e, BlockFile).Store(file)
	x.u64(e, BlockIndex).Store(index)
	x.u64(e, BlockAddr).Store(uint64(addr))
	x.u64(e, BlockValid).Store(valid)
	x.u64(e, BlockRef).Store(0)
	v0, v1 := x.unlockPair(e0, e1)
	// After the entry: a hint never names an address, or a sequence value,
	// before an entry does (and Clear leaves it: see HintEntry).
	if e == e0 {
		x.setHint(file, index, addr, v0)
	} else {
		x.setHint(file, index, addr, v1)
	}
}

// Hint is the hint of block (file, index)'s slot, for tests: its address
// word and its sequence value.
func (x *Index) Hint(file, index uint64) (word, seq uint64) {
	h := x.hintOf(file, index)
	return h.Load(), x.u64(unsafe.Pointer(h), HintStamp).Load()
}

// Valid adds pages to the valid set of the block's entry, if it has one,
// and moves the hint's sequence value with the entry's when the hint names
// the block (else C's next copy of it would not be predicted).
func (x *Index) Valid(file, index uint64, addr uintptr, valid uint64) {
	e0, e1 := x.pair(file, index)
	x.lockPair(e0, e1)
	owner := -1
	for i, e := range [2]unsafe.Pointer{e0, e1} {
		if x.ownsBlock(e, file, index, addr) {
			x.u64(e, BlockValid).Or(valid)
			owner = i
		}
	}
	v0, v1 := x.unlockPair(e0, e1)
	if owner < 0 || addr&hintTagMask != 0 || x.hintOf(file, index).Load() != uint64(addr)|HintTag(file, index) {
		return
	}
	x.setHint(file, index, addr, [2]uint64{v0, v1}[owner])
}

// Clear empties the block's entry: called when the block leaves the cache,
// before its memory can be reused. Both sequences move either way, so a C
// copy of any block of the pair in flight is redone.
func (x *Index) Clear(file, index uint64, addr uintptr) {
	e0, e1 := x.pair(file, index)
	x.lockPair(e0, e1)
	for _, e := range [2]unsafe.Pointer{e0, e1} {
		if x.ownsBlock(e, file, index, addr) {
			x.u64(e, BlockFile).Store(0)
			x.u64(e, BlockAddr).Store(0)
			x.u64(e, BlockValid).Store(0)
		}
	}
	x.unlockPair(e0, e1)
}

// Used reports whether C served a hit of the block since the last call, and
// clears the mark.
func (x *Index) Used(file, index uint64, addr uintptr) bool {
	e0, e1 := x.pair(file, index)
	for _, e := range [2]unsafe.Pointer{e0, e1} {
		r := (*atomic.Uint64)(unsafe.Add(e, BlockRef))
		if r.Load() != 0 && x.ownsBlock(e, file, index, addr) && r.Swap(0) != 0 {
			return true
		}
	}
	return false
}
