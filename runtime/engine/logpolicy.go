package engine

import (
	"github.com/memtier/memtier/runtime/logx"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/source"
)

// pathNames name policy.Path* in log lines.
var pathNames = map[int]string{policy.PathCache: "dram cache", policy.PathBuffered: "buffered",
	policy.PathDirect: "O_DIRECT", policy.PathStaged: "staged", policy.PathNone: "none"}

// logDecision prints a CPU read's policy decision at MEMTIER_LOG info (the
// choices that change how bytes move: O_DIRECT, a refused cache admission)
// and debug (every decision). One atomic load when the level is below info.
func (c *Context) logDecision(o source.Object, off, size uint64, flags uint32, d policy.Decision) {
	if !logx.Enabled(logx.Info) {
		return
	}
	name, end := o.Name(), off+size
	if d.Path == policy.PathDirect {
		logx.Infof("read.direct", "%s [%d, %d): O_DIRECT (%s)", name, off, end, d.Reason)
	}
	if c.pol.CacheEnabled && !d.Admit && d.Path != policy.PathCache &&
		flags&(policy.ReadOnce|policy.ReadNoAdmit|policy.ReadWillUse) == 0 && size > c.pol.AdmitMax {
		logx.Infof("cache.admit", "%s [%d, %d): not admitted to the DRAM cache: %d bytes exceed "+
			"cache_admit_max_bytes %d (hint READ_WILL_REUSE to admit)", name, off, end, size, c.pol.AdmitMax)
	}
	logx.Debugf("read.path", "%s [%d, %d): %s, row %d: %s", name, off, end, pathNames[d.Path], d.Row, d.Reason)
}
