package engine

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/source"
)

// Chunk is one object of LoadChunks (a RAG chunk, a KV-cache block, a tensor):
// Size bytes of the file at Off into Dst. Result is set to Size on success or
// to a negative status; Err holds the detail of a failure.
type Chunk struct {
	Off    uint64
	Size   uint64
	Dst    []byte
	Result int64
	Err    error
}

// smallUnitBytes: below this mean unit size a load is latency-bound (many
// small reads), so it runs SmallIODepth reads at once like readv; larger
// units are bandwidth-bound and IOThreads saturate them.
const smallUnitBytes = 256 << 10

// LoadTensor reads one tensor payload: a Read with default hints (admitted to
// the DRAM cache up to cache_admit_max_bytes, like any read: one tensor read
// on its own is as likely to be read again as any other range).
func (c *Context) LoadTensor(path string, off, size uint64, dst []byte, target int) error {
	return c.Read(path, off, size, dst, target, 0)
}

// chunkFlags are the read hints of every chunk of a load: policy.ReadNoAdmit.
// A chunk load reads each byte once into its
// destination (load_chunks, safetensors load_all, load_into), so staging it
// through DRAM cache blocks costs a second copy of every byte and holds the
// whole checkpoint in the cache as well as in the caller's tensors:
// measured on a 520 MB checkpoint, load_into ran at 1.1 GB/s with 527 MB of
// cache on top of the model, against 6.7 GB/s from the page cache without
// it. Hot ranges belong in the cache through memtier_prefetch or
// memtier_readv, which admit. READ_ONCE is not used for this: it also means
// "not wanted again" and lets a cold large read go O_DIRECT (policy row 7),
// which would leave the page cache empty for the next process's load;
// ReadNoAdmit keeps the buffered path (row 17).
const chunkFlags = policy.ReadNoAdmit

// sampleFlags are the read hints of a dataset's samples (Dataset.Read,
// ReadBatch) of object: chunkFlags for a local file (its page cache is that
// tier) and for a remote object below a disk cache, whose samples are read
// from the DRAM cache where windows.go put their window (a window found
// whole on disk is copied into DRAM before its samples are read, so the
// next epoch is DRAM hits) and otherwise from the disk tier (a window the
// tier is fetching now is not admitted: the first epoch holds one copy);
// none for a remote object without one, whose samples then fill the DRAM
// cache like any read (below a remote object there is no page cache to
// find them in next epoch: bench_remote measured a tar-shard epoch over
// URLs at 0.07x a local one when every sample went back to the server).
func (c *Context) sampleFlags(path string) uint32 {
	if remote.HasScheme(path) && c.diskTier() == nil {
		return 0
	}
	return chunkFlags
}

// LoadChunks reads every chunk of path (a local file or a URL) into its Dst.
// Chunks are sorted by
// offset, adjacent ones are read together with one preadv straight into their
// destinations, chunks larger than a task are split into task-size pieces,
// and the units run in parallel on the context's I/O workers. Each chunk gets
// its own Result; one bad chunk (past end of file, no destination) does not
// affect the others. The returned error is the lowest-index failure.
func (c *Context) LoadChunks(path string, ch []Chunk, target int) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	return c.loadChunks(path, ch, target, 0, nil, chunkFlags)
}

// errChanged is the failure of a load from a handle whose file changed since
// the handle was opened: its offsets describe another version of the file.
func errChanged(path string) error {
	return errs.At(errs.IO, "load", path, -1,
		"file changed since open (size, mtime or inode differ): open it again")
}

// chunkLoad is the state of one LoadChunks call.
type chunkLoad struct {
	c      *Context
	ch     []Chunk
	fin    []atomic.Bool // chunk i's Result is final and reported
	report func(i int)   // nil, or called once per chunk after its Result is final
	pieces map[int]*pieceState
	flags  uint32 // read hints of every chunk not served as part of a run: chunkFlags, or sampleFlags
	// windows: the chunks are a dataset's samples, read in windows when
	// the object is remote (windows.go); admitDisk: windows found on disk
	// may be copied into the DRAM cache (samplePass.admitDisk).
	windows, admitDisk bool
}

// pieceState collects the pieces of one chunk larger than a task.
type pieceState struct {
	flags uint32
	path  int  // policy path decided once for the whole chunk
	admit bool // the chunk fills the DRAM cache
	left  atomic.Int64
	mu    sync.Mutex
	s     served
	err   error
}

// loadChunks is LoadChunks without enter: want != 0 makes every chunk fail
// with errChanged unless the file's current version ID is want; report, if
// not nil, is called once per chunk as soon as its Result is final (from
// worker goroutines, in completion order). flags are the read hints of its
// single chunks and pieces (chunkFlags, or sampleFlags; a run of adjacent
// chunks is a scan: never admitted).
func (c *Context) loadChunks(path string, ch []Chunk, target int, want uint64, report func(int), flags uint32) error {
	return c.loadChunksLoad(&chunkLoad{c: c, ch: ch, report: report, flags: flags}, path, target, want)
}

// loadSamples is loadVersion for a dataset's samples: sampleFlags, and a
// remote object's read in windows (windows.go), those found on disk copied
// into the DRAM cache when admitDisk.
func (c *Context) loadSamples(path string, ch []Chunk, target int, want uint64, admitDisk bool) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	return c.loadChunksLoad(&chunkLoad{c: c, ch: ch, flags: c.sampleFlags(path), windows: true, admitDisk: admitDisk}, path, target, want)
}

// loadChunksLoad runs the load l (its chunks, report, flags and windows set).
func (c *Context) loadChunksLoad(l *chunkLoad, path string, target int, want uint64) error {
	ch := l.ch
	c.st.Requests.Add(uint64(len(ch)))
	l.fin = make([]atomic.Bool, len(ch))
	valid := make([]int, 0, len(ch))
	var gpuErr error // target CUDA without a usable backend
	if target == policy.TargetCUDA {
		gpuErr = gpuUsable("load_chunks", path, -1)
	}
	for i := range ch {
		e := &ch[i]
		e.Result, e.Err = 0, nil
		switch {
		case gpuErr != nil:
			l.fail(i, gpuErr)
		case target != policy.TargetCPU && target != policy.TargetCUDA:
			l.fail(i, errs.At(errs.InvalidArg, "load_chunks", path, -1, "unknown target %d", target))
		case e.Size == 0:
			c.account(served{})
			l.done(i)
		default:
			if err := checkRange("load_chunks", path, e.Off, e.Size, len(e.Dst), 0); err != nil {
				l.fail(i, err)
				continue
			}
			valid = append(valid, i)
		}
	}
	switch {
	case len(valid) > 0 && target == policy.TargetCUDA && remote.HasScheme(path):
		// As readGPU answers a URL: the CUDA target reads local files only
		// so far (its staged plan of a remote object is untested).
		for _, i := range valid {
			l.fail(i, errRemoteHere(path))
		}
	case len(valid) > 0 && target == policy.TargetCUDA:
		l.runGPU(path, valid, want)
	case len(valid) > 0:
		l.run(path, valid, want)
	}
	for i := range ch {
		if ch[i].Err != nil {
			return ch[i].Err
		}
	}
	return nil
}

// open opens path (a local file or a URL) for the valid chunks, checking it
// is still version want (0: any). On failure every valid chunk fails with
// the error and open returns nil; otherwise the caller releases the object.
func (l *chunkLoad) open(path string, valid []int, want uint64) source.Object {
	f, err := l.c.openTrusting(path, l.trust(path, want))
	if err == nil && want != 0 && f.Version() != want {
		f.Release()
		err = errChanged(path)
	}
	if err != nil {
		for _, i := range valid {
			l.fail(i, err)
		}
		return nil
	}
	return f
}

// trust is how long the open of path may trust its last check: the
// context's freshness, except for a dataset's samples of a remote object
// (windows, want set), which trust the version the handle checked at open
// (its ETag; remoteSamplesTrust).
func (l *chunkLoad) trust(path string, want uint64) time.Duration {
	if l.windows && want != 0 && remote.HasScheme(path) {
		return remoteSamplesTrust
	}
	return l.c.trust
}

// run opens the file once and serves the valid chunks.
func (l *chunkLoad) run(path string, valid []int, want uint64) {
	c := l.c
	f := l.open(path, valid, want)
	if f == nil {
		return
	}
	defer f.Release()
	inside := valid[:0]
	for _, i := range valid {
		if err := checkEOF(f, l.ch[i].Off, l.ch[i].Size); err != nil {
			l.fail(i, err)
			continue
		}
		inside = append(inside, i)
	}
	if l.windows {
		onDisk := c.fillWindows(f, l.ch, inside, l.admitDisk) // remote samples: one read per window
		inside = l.serveFromDisk(f, inside, onDisk)
	}
	units := planChunks(l.ch, inside, c.opts.TaskBytes)
	var total uint64
	for _, u := range units {
		total += u.hi - u.lo
		if u.piece {
			l.addPiece(f, u.members[0])
		}
	}
	par := c.opts.IOThreads
	if len(units) > 0 && total/uint64(len(units)) < smallUnitBytes {
		par = max(par, c.opts.SmallIODepth)
	}
	runErr := c.rd.Run(len(units), par, func(k int) error {
		l.serveUnit(f, &units[k])
		return nil
	})
	if runErr != nil { // a recovered panic: what did not finish fails with it
		for _, i := range inside {
			l.fail(i, runErr)
		}
	}
}

// addPiece registers one piece of the large chunk i, deciding the chunk's
// path once for its whole size (a piece alone is below direct_threshold).
func (l *chunkLoad) addPiece(f source.Object, i int) {
	if l.pieces == nil {
		l.pieces = map[int]*pieceState{}
	}
	p := l.pieces[i]
	if p == nil {
		e := &l.ch[i]
		p = &pieceState{flags: l.flags}
		d := l.c.decide(f, e.Off, e.Size, p.flags, 0)
		p.path, p.admit = d.Path, d.Admit && l.c.cache != nil
		l.pieces[i] = p
	}
	p.left.Add(1)
}

// done marks chunk i successful (Result = Size) and reports it, once.
func (l *chunkLoad) done(i int) {
	if l.fin[i].CompareAndSwap(false, true) {
		l.ch[i].Result = int64(l.ch[i].Size)
		if l.report != nil {
			l.report(i)
		}
	}
}

// fail records err as chunk i's result and reports it, once.
func (l *chunkLoad) fail(i int, err error) {
	if l.fin[i].CompareAndSwap(false, true) {
		l.ch[i].Err, l.ch[i].Result = err, int64(errs.CodeOf(err))
		if l.report != nil {
			l.report(i)
		}
	}
}
