package engine

import (
	"unsafe"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/objects"
	"github.com/memtier/memtier/runtime/policy"
)

// SafetensorsFile is a safetensors file opened through a Context: its
// validated header and the version of the file the header was read from.
// Loads fail with errs.IO "changed since open" once the file is another
// version, instead of reading another file's bytes at this header's offsets.
// Safe for concurrent use; it holds no descriptor.
type SafetensorsFile struct {
	*objects.Safetensors
	Path    string
	c       *Context
	version uint64 // the object's Version at open
}

// OpenSafetensors reads and validates path's header (objects.ParseSafetensors
// with the reference limits): a local file through the context's descriptor
// table, a URL (s3://, http(s)://) with ranged reads of the object (its
// first bytes come with the open, objectReader). Errors: errs.Format for a
// malformed file, the open errors of Read, errs.InvalidArg for an empty
// path, errs.Closed.
func (c *Context) OpenSafetensors(path string) (*SafetensorsFile, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	if path == "" {
		return nil, errs.New(errs.InvalidArg, "safetensors_open", "empty path")
	}
	f, err := c.openTrusting(path, files.TrustNone) // validated at open (doc.go)
	if err != nil {
		return nil, err
	}
	defer f.Release()
	st, err := objects.ParseSafetensors(c.metaReader(f), int64(f.Size()), objects.SafetensorsLimits{})
	if err != nil {
		return nil, stampPath(err, displayName(f))
	}
	return &SafetensorsFile{Safetensors: st, Path: path, c: c, version: f.Version()}, nil
}

// Load reads tensor i's payload into dst, which must hold at least its bytes
// (errs.InvalidArg otherwise, with nothing written). A zero-element tensor
// succeeds without touching dst.
func (s *SafetensorsFile) Load(i int, dst []byte, target int) error {
	if i < 0 || i >= len(s.Tensors) {
		return errs.At(errs.InvalidArg, "safetensors_load", s.Path, -1, "tensor index %d out of range (%d tensors)", i, len(s.Tensors))
	}
	t := &s.Tensors[i]
	n := uint64(t.End - t.Begin)
	if uint64(len(dst)) < n {
		return errs.At(errs.InvalidArg, "safetensors_load", s.Path, t.Begin,
			"destination holds %d bytes, tensor %q has %d", len(dst), t.Name, n)
	}
	ch := []Chunk{{Off: uint64(t.Begin), Size: n, Dst: dst}}
	return s.c.loadVersion(s.Path, ch, target, s.version, chunkFlags)
}

// LoadAll reads every tensor i whose dsts[i] is not nil into dsts[i] (which
// must hold its bytes) as one LoadChunks call, so adjacent tensors are read
// together and in parallel. results[i] gets tensor i's result (bytes or a
// negative status; 0 for a skipped tensor). dsts and results have one entry
// per tensor. The error is the lowest-index failure.
func (s *SafetensorsFile) LoadAll(dsts [][]byte, results []int64, target int) error {
	if len(dsts) != len(s.Tensors) || len(results) != len(s.Tensors) {
		return errs.At(errs.InvalidArg, "safetensors_load_all", s.Path, -1,
			"%d destinations and %d results for %d tensors", len(dsts), len(results), len(s.Tensors))
	}
	ch, groups := s.mergeContiguous(dsts, results)
	err := s.c.loadTensors(s.Path, ch, target, s.version)
	for k, g := range groups {
		for _, i := range g {
			if r := ch[k].Result; r < 0 {
				results[i] = r
			} else {
				results[i] = s.Tensors[i].End - s.Tensors[i].Begin
			}
		}
	}
	return err
}

// mergeContiguous turns the tensors to load into chunks: tensors that follow
// each other in the file and whose destinations also follow each other in
// memory (one buffer laid out like the data section, as memtier's Python
// loader allocates it) become ONE chunk. A whole checkpoint is then a single
// range that LoadChunks splits into task-size pieces with one path decision,
// so a cold load goes O_DIRECT straight into the buffer when the buffer is
// placed at the file's alignment, instead of one preadv per small run.
// groups[k] lists the tensors of chunk k; skipped and zero-byte tensors get
// result 0 and are in no group.
func (s *SafetensorsFile) mergeContiguous(dsts [][]byte, results []int64) ([]Chunk, [][]int) {
	ch := make([]Chunk, 0, len(dsts))
	groups := make([][]int, 0, len(dsts))
	var base *byte // first byte of the open chunk's destination
	for i, d := range dsts {
		results[i] = 0
		t := &s.Tensors[i]
		n := uint64(t.End - t.Begin)
		if d == nil || n == 0 {
			if n > 0 {
				base = nil // a skipped tensor's bytes are not the caller's to write
			}
			continue
		}
		p := unsafe.SliceData(d)
		if k := len(ch) - 1; base != nil && k >= 0 && ch[k].Off+ch[k].Size == uint64(t.Begin) &&
			uintptr(unsafe.Pointer(p)) == uintptr(unsafe.Pointer(base))+uintptr(ch[k].Size) {
			ch[k].Size += n
			ch[k].Dst = unsafe.Slice(base, ch[k].Size)
			groups[k] = append(groups[k], i)
			continue
		}
		base = p
		ch = append(ch, Chunk{Off: uint64(t.Begin), Size: n, Dst: d[:n:n]})
		groups = append(groups, []int{i})
	}
	return ch, groups
}

// loadTensors is loadVersion for a checkpoint's tensors: a large warm local
// load is a mapped copy (mapcopy.go), the others the planned path.
func (c *Context) loadTensors(path string, ch []Chunk, target int, want uint64) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	if target == policy.TargetCPU && c.loadMapped(path, ch, want) {
		for i := range ch {
			if ch[i].Err != nil {
				return ch[i].Err
			}
		}
		return nil
	}
	return c.loadChunks(path, ch, target, want, nil, chunkFlags)
}

// loadVersion is LoadChunks of a handle made at file version want, with
// the read hints flags (loadChunks).
func (c *Context) loadVersion(path string, ch []Chunk, target int, want uint64, flags uint32) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	return c.loadChunks(path, ch, target, want, nil, flags)
}
