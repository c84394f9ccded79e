package gpu

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/memtier/memtier/runtime/logx"
)

// TargetOptions sizes a Target. The members are created on first use, so a
// Target of a CPU-only program never initialises CUDA.
type TargetOptions struct {
	Lanes      int    // Stager lanes (0: DefaultLanes)
	HBMDevice  int    // device ordinal of the HBM cache
	HBMBudget  uint64 // HBM cache bytes; 0: the HBM tier is off
	HBMBlock   uint64 // HBM cache block bytes (0: DefaultHBMBlockSize)
	ChunkBytes uint64 // pinned staging buffer bytes (0: DefaultChunkSize)
}

// Target is one engine context's GPU side: its Stager, HBM cache and GDS
// reader (each created on first use), what it learnt about GDS (a failed
// probe, per-file fallbacks) and its one set of GPU counters. All methods are
// safe for concurrent use. The engine plans device reads; a Target holds the
// state those plans run on.
type Target struct {
	opts TargetOptions
	mu   sync.Mutex // serialises creation of the members below
	stg  atomic.Pointer[Stager]
	hbm  atomic.Pointer[HBMCache]
	gds  atomic.Pointer[GDS]
	// gdsErr: the probe failed, GDS is unavailable for this Target.
	gdsErr  atomic.Pointer[Error]
	probing sync.Mutex // one OpenGDS at a time
	st      Stats

	fbMu      sync.Mutex
	fallbacks map[uint64]string   // file version -> why GDS fell back (not retried)
	hbmFiles  map[uint64]struct{} // file versions with blocks in the HBM cache
	last      string              // the latest fallback, for Info
	base      StatsSnapshot       // counters at the last ResetStats
}

// maxRememberedFallbacks bounds the per-file fallback memory; when full it
// is cleared (a forgotten file is tried with GDS once more).
const maxRememberedFallbacks = 4096

// NewTarget returns a Target that has created nothing yet.
func NewTarget(o TargetOptions) *Target {
	if o.Lanes <= 0 {
		o.Lanes = DefaultLanes
	}
	if o.HBMBlock == 0 {
		o.HBMBlock = DefaultHBMBlockSize
	}
	return &Target{opts: o}
}

// Options returns the options the Target was made with (defaults filled).
func (t *Target) Options() TargetOptions { return t.opts }

// Stager returns the Target's Stager, creating it on first use (pinned
// buffers are allocated lane by lane when reads need them). Errors: those of
// NewStager.
func (t *Target) Stager() (*Stager, error) {
	if s := t.stg.Load(); s != nil {
		return s, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.stg.Load(); s != nil {
		return s, nil
	}
	s, err := NewStager(StagerOptions{Lanes: t.opts.Lanes, ChunkSize: t.opts.ChunkBytes, Stats: &t.st})
	if err != nil {
		return nil, err
	}
	t.stg.Store(s)
	return s, nil
}

// HBM returns the HBM cache, creating it (empty: it allocates device memory
// block by block as fills need it) on first use. Errors: KindInvalidArg
// when the budget is below one block (the tier is off), those of
// NewHBMCache.
func (t *Target) HBM() (*HBMCache, error) {
	if h := t.hbm.Load(); h != nil {
		return h, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.hbm.Load(); h != nil {
		return h, nil
	}
	h, err := NewHBMCache(HBMOptions{Device: t.opts.HBMDevice, Budget: t.opts.HBMBudget,
		BlockSize: t.opts.HBMBlock, Stats: &t.st})
	if err != nil {
		return nil, err
	}
	t.hbm.Store(h)
	return h, nil
}

// HBMOn returns the HBM cache when it exists, lives on device dev and holds
// at least one block; else nil. It never creates the cache, so a read on a
// context that never prefetched to HBM does not touch it.
func (t *Target) HBMOn(dev int) *HBMCache {
	h := t.hbm.Load()
	if h == nil || h.Device() != dev {
		return nil
	}
	if _, resident, _ := h.Usage(); resident == 0 {
		return nil
	}
	return h
}

// HBMResident is the bytes the HBM cache holds (0 before it exists).
func (t *Target) HBMResident() uint64 {
	if h := t.hbm.Load(); h != nil {
		_, resident, _ := h.Usage()
		return resident
	}
	return 0
}

// GDS returns the GDS reader, probing the cuFile driver on first use
// (seconds on some machines; only a read that chose GDS gets here). A failed
// probe is remembered: nil and that error from then on.
func (t *Target) GDS() (*GDS, *Error) {
	if g := t.gds.Load(); g != nil {
		return g, nil
	}
	if e := t.gdsErr.Load(); e != nil {
		return nil, e
	}
	t.probing.Lock()
	defer t.probing.Unlock()
	if g := t.gds.Load(); g != nil {
		return g, nil
	}
	if e := t.gdsErr.Load(); e != nil {
		return nil, e
	}
	g, err := OpenGDS(&t.st)
	if err != nil {
		var ge *Error
		if !errors.As(err, &ge) {
			ge = &Error{Kind: KindUnavailable, Detail: err.Error()}
		}
		t.gdsErr.Store(ge)
		return nil, ge
	}
	t.gds.Store(g)
	return g, nil
}

// GDSCompat reports whether the cuFile driver is open and runs only in its
// compatibility mode (false before the probe).
func (t *Target) GDSCompat() bool {
	g := t.gds.Load()
	return g != nil && g.Compat()
}

// GDSProbed reports whether the cuFile driver was opened successfully.
func (t *Target) GDSProbed() bool { return t.gds.Load() != nil }

// GDSUnavailable is why GDS cannot run ("" when it can or was not probed).
func (t *Target) GDSUnavailable() string {
	if e := t.gdsErr.Load(); e != nil {
		return UnavailableText(e)
	}
	return ""
}

// UnavailableText formats a failed GDS probe: "GDS unavailable (<reason
// key>): <why>".
func UnavailableText(e *Error) string {
	return "GDS unavailable (" + e.Reason() + "): " + strings.TrimPrefix(e.Error(), "GDS unavailable: ")
}

// ForgetFD drops cuFile's registration of descriptor fd (the descriptor
// table calls it before closing an O_DIRECT descriptor).
func (t *Target) ForgetFD(fd int) {
	if g := t.gds.Load(); g != nil {
		g.Forget(fd)
	}
}

// NoteFallback counts one GDS attempt that was served staged instead,
// under reason (a (*Error).Reason key or the engine's own). perFile
// remembers it for the file version (GDS is not tried again for it); name
// and err make the latest-fallback line of Info.
func (t *Target) NoteFallback(version uint64, name, reason string, err error, perFile bool) {
	t.st.Fallback(reason)
	logx.Warnf("gds.fallback", "%s: GDS fell back to staged reads (%s): %v", name, reason, err)
	t.fbMu.Lock()
	defer t.fbMu.Unlock()
	if perFile {
		if t.fallbacks == nil || len(t.fallbacks) >= maxRememberedFallbacks {
			t.fallbacks = map[uint64]string{}
		}
		t.fallbacks[version] = reason
	}
	t.last = fmt.Sprintf("%s: %s: %v", name, reason, err)
}

// FileFallback is why GDS fell back for this file version before ("" if it
// did not).
func (t *Target) FileFallback(version uint64) string {
	t.fbMu.Lock()
	defer t.fbMu.Unlock()
	return t.fallbacks[version]
}

// LastFallback is the latest fallback, "file: reason: error" ("" if none).
func (t *Target) LastFallback() string {
	t.fbMu.Lock()
	defer t.fbMu.Unlock()
	return t.last
}

// NoteHBMFile records that version has blocks in the HBM cache, so DropHBM
// of every file can find them.
func (t *Target) NoteHBMFile(version uint64) {
	t.fbMu.Lock()
	defer t.fbMu.Unlock()
	if t.hbmFiles == nil {
		t.hbmFiles = map[uint64]struct{}{}
	}
	t.hbmFiles[version] = struct{}{}
}

// DropHBM removes the HBM blocks of the file versions (every block when all
// is set). Version 0 is ignored.
func (t *Target) DropHBM(versions []uint64, all bool) {
	h := t.hbm.Load()
	if h == nil {
		return
	}
	t.fbMu.Lock()
	defer t.fbMu.Unlock()
	if all {
		for id := range t.hbmFiles {
			h.RemoveFile(id)
		}
		t.hbmFiles = nil
		return
	}
	for _, id := range versions {
		if id != 0 {
			h.RemoveFile(id)
			delete(t.hbmFiles, id)
		}
	}
}

// Stats returns the counters since the last ResetStats.
func (t *Target) Stats() StatsSnapshot {
	snap := t.st.Snapshot()
	t.fbMu.Lock()
	base := t.base
	t.fbMu.Unlock()
	return snap.Sub(base)
}

// ResetStats starts the counters from zero for Stats.
func (t *Target) ResetStats() {
	snap := t.st.Snapshot()
	t.fbMu.Lock()
	t.base = snap
	t.fbMu.Unlock()
}

// Close frees the Stager's pinned buffers and the HBM cache's device
// memory. Not for a process-exit path: it calls into CUDA.
func (t *Target) Close() {
	if s := t.stg.Load(); s != nil {
		_ = s.Close()
	}
	if h := t.hbm.Load(); h != nil {
		_ = h.Close()
	}
}
