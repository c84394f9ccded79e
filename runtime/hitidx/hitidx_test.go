package hitidx

import (
	"testing"
	"unsafe"
)

func newIndex(t *testing.T, blockSlots int) *Index {
	t.Helper()
	x, err := New(Options{FileSlots: 16, BlockSlots: blockSlots, BlockShift: 16, Now: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Close)
	return x
}

// entrySeq is the sequence value of the entry of the pair of (file, index)
// that holds the block at addr, or 0 when none does.
func entrySeq(x *Index, file, index uint64, addr uintptr) uint64 {
	e0, e1 := x.pair(file, index)
	for _, e := range [2]unsafe.Pointer{e0, e1} {
		if x.ownsBlock(e, file, index, addr) {
			return x.u64(e, BlockSeq).Load()
		}
	}
	return 0
}

// A claimed block's hint names its address and its entry's sequence value,
// and follows that value when Valid moves it; Clear leaves the hint (a hint
// is only a prediction that C checks against the entry).
func TestHintFollowsClaim(t *testing.T) {
	x := newIndex(t, 64)
	if got := x.u64(x.base, HdrHintMask).Load(); got != 15 {
		t.Fatalf("hint mask %d, want 15 (64 block slots / 4 - 1)", got)
	}
	tag := HintTag(7, 3)
	if tag != blockHash(7, 3)>>52 || tag > hintTagMask {
		t.Fatalf("tag %#x", tag)
	}
	x.Claim(7, 3, 0x10000, 1)
	// The first write of the region: the pair's values are 4 (e0) and 2 (e1).
	if w, seq := x.Hint(7, 3); w != 0x10000|tag || seq != entrySeq(x, 7, 3, 0x10000) || seq != 4 {
		t.Fatalf("hint %#x seq %d after Claim, want %#x seq 4 (the entry's %d)", w, seq, 0x10000|tag,
			entrySeq(x, 7, 3, 0x10000))
	}
	x.Valid(7, 3, 0x10000, 2)
	if w, seq := x.Hint(7, 3); w != 0x10000|tag || seq != 8 || entrySeq(x, 7, 3, 0x10000) != 8 {
		t.Fatalf("hint %#x seq %d after Valid, want %#x seq 8 (the entry's %d)", w, seq, 0x10000|tag,
			entrySeq(x, 7, 3, 0x10000))
	}
	x.Clear(7, 3, 0x10000)
	if w, seq := x.Hint(7, 3); w != 0x10000|tag || seq != 8 {
		t.Fatalf("hint %#x seq %d after Clear, want it left at %#x seq 8", w, seq, 0x10000|tag)
	}
	x.Claim(7, 3, 0x20000, 1)
	if w, seq := x.Hint(7, 3); w != 0x20000|tag || seq != 16 || entrySeq(x, 7, 3, 0x20000) != 16 {
		t.Fatalf("hint %#x seq %d after a new Claim, want %#x seq 16", w, seq, 0x20000|tag)
	}
	x.Valid(7, 3, 0x30000, 2) // not the entry's address: nothing moves but the pair's values
	if w, seq := x.Hint(7, 3); w != 0x20000|tag || seq != 16 {
		t.Fatalf("hint %#x seq %d after Valid of another address, want %#x seq 16", w, seq, 0x20000|tag)
	}
	x.Claim(7, 3, 0x20010, 1) // not page aligned: no room for the tag
	if w, _ := x.Hint(7, 3); w != 0 {
		t.Fatalf("hint %#x for an unaligned address, want 0", w)
	}
}

// No two writes of any block entries leave the same sequence value, and
// every entry's values only grow: a hint's value names one state of one
// entry (HintEntry).
func TestSequenceValuesUnique(t *testing.T) {
	x := newIndex(t, 64)
	seen := map[uint64]bool{}
	last := map[unsafe.Pointer]uint64{}
	for i := uint64(0); i < 200; i++ {
		file, index := 1+i%5, i%7
		addr := uintptr(0x10000 * (1 + i%3))
		switch i % 3 {
		case 0:
			x.Claim(file, index, addr, 1)
		case 1:
			x.Valid(file, index, addr, 2)
		case 2:
			x.Clear(file, index, addr)
		}
		e0, e1 := x.pair(file, index)
		for _, e := range [2]unsafe.Pointer{e0, e1} {
			v := x.u64(e, BlockSeq).Load()
			if v&1 != 0 || v <= last[e] || seen[v] {
				t.Fatalf("write %d: entry value %d (odd, not above its last %d, or seen before)", i, v, last[e])
			}
			seen[v], last[e] = true, v
		}
	}
}

// A region of at least half a huge page starts at a huge-page boundary and
// covers whole huge pages; a small one is mapped as it is.
func TestRegionMapping(t *testing.T) {
	big := newIndex(t, 1<<15) // 2 MiB of block entries
	if a := uintptr(big.base); a%hugePage != 0 || len(big.mem)%hugePage != 0 {
		t.Fatalf("region at %#x, %d bytes: want 2 MiB aligned and sized", a, len(big.mem))
	}
	small := newIndex(t, 64)
	want := hdrSize + 16*HintEntry + 16*FileEntry + 64*BlockEntry
	if len(small.mem) != want || unsafe.Pointer(&small.mem[0]) != small.base {
		t.Fatalf("small region %d bytes, want %d", len(small.mem), want)
	}
}

// A pair holds two blocks whatever their keys: two blocks of a file are
// always both in the table (what capi's hit tests rely on). A third block
// of the pair displaces the one C did not hit (the first when neither was),
// and Go serves the displaced block's reads.
func TestFullPairKeepsTwo(t *testing.T) {
	x := newIndex(t, 64)
	const file = 7
	var same []uint64 // three indexes whose keys hash to one pair
	for i := uint64(0); len(same) < 3; i++ {
		if len(same) == 0 || BlockSlot(file, i, x.bmask) == BlockSlot(file, same[0], x.bmask) {
			same = append(same, i)
		}
	}
	e0, e1 := x.pair(file, same[0])
	has := func(i uint64) bool { return x.hasKey(e0, file, i) || x.hasKey(e1, file, i) }
	x.Claim(file, same[0], 0x10000, 1)
	x.Claim(file, same[1], 0x20000, 1)
	if !has(same[0]) || !has(same[1]) {
		t.Fatal("two blocks of one pair: not both in it")
	}
	x.Claim(file, same[2], 0x30000, 1)
	if has(same[0]) || !has(same[1]) || !has(same[2]) {
		t.Fatalf("third block, neither used: has %v %v %v, want the first displaced", has(same[0]), has(same[1]), has(same[2]))
	}
	// C hit same[2] (its use bit): a fourth claim of block same[0] displaces same[1].
	for _, e := range [2]unsafe.Pointer{e0, e1} {
		if x.hasKey(e, file, same[2]) {
			x.u64(e, BlockRef).Store(1)
		}
	}
	x.Claim(file, same[0], 0x40000, 1)
	if !has(same[0]) || has(same[1]) || !has(same[2]) {
		t.Fatalf("after C used one: has %v %v %v, want the unused one displaced", has(same[0]), has(same[1]), has(same[2]))
	}
}
