package engine

import (
	"cmp"
	"slices"

	"github.com/memtier/memtier/runtime/diskcache"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/source"
)

// Samples whose windows fillWindows left on the disk tier (onDisk) are read
// from there in runs of neighbours, one diskcache.Source.ReadSegs each: a
// tar shard's samples lie a 512-byte header apart, so a run of a batch's
// samples reads each piece of the entries once, straight into the samples'
// destinations, and checks it while it is in the CPU cache. Read one by
// one, each sample read the 64 KiB pieces it shares with its neighbours
// whole into a scratch buffer and copied its part out: about twice the
// bytes read and checked of a local file's epoch (BenchmarkDiskTierSecondProcess).
const (
	// diskRunGap is the largest gap between two samples of one run: the
	// checksum piece, so a gap costs at most the piece it lies in, which a
	// read of the samples beside it needs anyway.
	diskRunGap = 64 << 10
	// diskRunMax caps a run's span, so a batch's runs spread over the I/O
	// workers; a piece at a cut is read by the runs on both sides (at most
	// one piece in 32 twice).
	diskRunMax = 2 << 20
)

// serveFromDisk serves the chunks idx of f (a remote object) whose every
// window is in onDisk (fillWindows: all their blocks on disk) in runs
// (ReadSegs), counted as their one-by-one reads are (a buffered read per
// chunk, a coalesced read per run), and returns the chunks left for the
// ordinary plan: those outside onDisk, larger than a run, or overlapping
// the chunk before them. A run ReadSegs cannot serve (a block evicted
// since, a corrupt entry: counted and deleted) is served chunk by chunk,
// which fetches what the tier lacks.
func (l *chunkLoad) serveFromDisk(f source.Object, idx []int, onDisk []uint64) []int {
	ro, ok := f.(*remote.Object)
	disk := l.c.diskTier()
	if !ok || disk == nil || len(onDisk) == 0 {
		return idx
	}
	W := l.c.windowBytes()
	held := func(e *Chunk) bool {
		for w := e.Off / W * W; w < e.Off+e.Size; w += W {
			if _, found := slices.BinarySearch(onDisk, w); !found {
				return false
			}
		}
		return true
	}
	var rest, mine []int
	for _, i := range idx {
		if e := &l.ch[i]; e.Size <= diskRunMax && held(e) {
			mine = append(mine, i)
		} else {
			rest = append(rest, i)
		}
	}
	slices.SortFunc(mine, func(a, b int) int {
		return cmp.Or(cmp.Compare(l.ch[a].Off, l.ch[b].Off), cmp.Compare(a, b))
	})
	var runs [][]int
	var lo, end uint64 // the open run's span
	for _, i := range mine {
		e := &l.ch[i]
		switch {
		case len(runs) > 0 && e.Off < end:
			rest = append(rest, i) // overlaps its neighbour: a read of its own
			continue
		case len(runs) > 0 && e.Off-end <= diskRunGap && e.Off+e.Size-lo <= diskRunMax:
			runs[len(runs)-1] = append(runs[len(runs)-1], i)
		default:
			runs = append(runs, []int{i})
			lo = e.Off
		}
		end = e.Off + e.Size
	}
	runErr := l.c.rd.Run(len(runs), l.c.opts.IOThreads, func(k int) error {
		l.serveDiskRun(f, ro, disk, runs[k])
		return nil
	})
	if runErr != nil { // a recovered panic: what did not finish fails with it
		for _, r := range runs {
			for _, i := range r {
				l.fail(i, runErr)
			}
		}
	}
	return rest
}

// serveDiskRun reads the chunks run (sorted, apart) of ro with one
// ReadSegs, or one by one when it cannot serve them.
func (l *chunkLoad) serveDiskRun(f source.Object, ro *remote.Object, disk *diskcache.Source, run []int) {
	segs := make([]diskcache.Seg, len(run))
	for k, i := range run {
		e := &l.ch[i]
		segs[k] = diskcache.Seg{Off: e.Off, Dst: e.Dst[:e.Size]}
	}
	if !disk.ReadSegs(ro, segs) {
		for _, i := range run {
			e := &l.ch[i]
			l.serveUnit(f, &chunkUnit{members: []int{i}, lo: e.Off, hi: e.Off + e.Size})
		}
		return
	}
	l.c.st.CoalescedReads.Add(1)
	for _, i := range run {
		l.c.account(served{buffered: l.ch[i].Size})
		l.done(i)
	}
}
