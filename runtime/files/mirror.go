//go:build linux

package files

// Mirror is told of the Files a Table holds, for an index that is read
// without the table's locks (runtime/hitidx, read by capi/hit.c to serve
// cache hits outside Go). Installed and Detached are called with the table's
// lock held for writing: Installed when f became its path's File, Detached
// when it left the table, before its descriptors can be closed. Checked is
// called after f's check times moved (f.CheckTimes). Used is called when the
// descriptor LRU looks at f (lock held): it reports, and forgets, whether the
// index's reader used f since. Methods must be safe for concurrent use and
// must not call the Table.
type Mirror interface {
	Installed(f *File)
	Detached(f *File)
	Checked(f *File)
	Used(f *File) bool
}

// SetMirror installs m. Call it before the first Acquire.
func (t *Table) SetMirror(m Mirror) { t.mirror = m }

// CheckTimes returns when f's path was last resolved to it (a stat of the
// path that matched) and when f was last checked (fstat or stat), on the
// clock of Now, in ns. Safe for concurrent use.
func (f *File) CheckTimes() (resolved, checked int64) { return f.resolved.Load(), f.checked.Load() }

// Now is the clock of CheckTimes: monotonic ns since the package started.
func Now() int64 { return nanotime() }

func (t *Table) mirrorChecked(f *File) {
	if t.mirror != nil {
		t.mirror.Checked(f)
	}
}

// lastUseOf is f's LRU tick, moved to now when the mirror's reader used f.
// t.mu is held for writing.
func (t *Table) lastUseOf(f *File) uint64 {
	if t.mirror != nil && t.mirror.Used(f) {
		f.lastUse.Store(lruTick.Add(1))
	}
	return f.lastUse.Load()
}
