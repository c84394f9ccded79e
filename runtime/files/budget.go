//go:build linux

package files

import (
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/errs"
)

// The descriptor budget is per process, shared by every Table: each context
// (and each Python dataset's context) has its own Table, and per-table bounds
// alone multiply with the number of contexts until the host's RLIMIT_NOFILE is
// gone (field case N03, tests/field_cases.md). The budget is a share of the soft limit read at
// use, since the host may lower it at any time (setrlimit, prlimit).
const (
	// BudgetShare: MemTier keeps at most softLimit/BudgetShare descriptors,
	// leaving the rest of the limit to the host.
	BudgetShare = 4
	// MinBudget is the budget under a tiny limit: below it every read would
	// reopen its file.
	MinBudget = 8
)

// procFiles is the process-wide side of every Table.
var procFiles struct {
	held atomic.Int64 // descriptors open in all Tables (buffered and O_DIRECT)
	over atomic.Bool  // over budget while every File was busy: the next idle Release trims

	mu     sync.Mutex // guards tables; taken before any Table.mu, never after
	tables []*Table
}

// lruTick is the process-wide LRU clock, advanced by every Acquire, so idle
// Files of different Tables can be compared when the process budget trims.
var lruTick atomic.Uint64

// softLimit returns the current soft RLIMIT_NOFILE (a variable so tests can
// inject a limit without changing the test process's own).
var softLimit = func() uint64 {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) != nil {
		return 1024 // Linux's default soft limit
	}
	return rl.Cur
}

// Budget returns how many descriptors all Tables of this process may hold
// together, max(MinBudget, soft/BudgetShare), and the soft RLIMIT_NOFILE it was
// derived from (read now: one getrlimit). Safe for concurrent use.
func Budget() (budget int, soft uint64) {
	soft = softLimit()
	b := soft / BudgetShare
	if b < MinBudget {
		b = MinBudget
	}
	if b > 1<<30 {
		b = 1 << 30 // RLIM_INFINITY
	}
	return int(b), soft
}

// Held returns how many descriptors all Tables of this process hold now,
// busy and idle, buffered and O_DIRECT. Safe for concurrent use.
func Held() int { return int(procFiles.held.Load()) }

func register(t *Table) {
	procFiles.mu.Lock()
	procFiles.tables = append(procFiles.tables, t)
	procFiles.mu.Unlock()
}

func unregister(t *Table) {
	procFiles.mu.Lock()
	defer procFiles.mu.Unlock()
	for i, x := range procFiles.tables {
		if x == t {
			last := len(procFiles.tables) - 1
			procFiles.tables[i] = procFiles.tables[last]
			procFiles.tables[last] = nil
			procFiles.tables = procFiles.tables[:last]
			return
		}
	}
}

// trimProcess closes least recently used idle Files of any Table until the
// process holds at most limit descriptors, or none is idle (then over is set
// and the next idle Release trims again). It returns how many descriptors it
// closed. Callers hold no Table.mu.
func trimProcess(limit int) int {
	procFiles.mu.Lock()
	defer procFiles.mu.Unlock()
	closed := 0
	for procFiles.held.Load() > int64(limit) {
		n := evictOldestLocked()
		if n == 0 {
			procFiles.over.Store(true)
			return closed
		}
		closed += n
	}
	procFiles.over.Store(false)
	return closed
}

// evictOldestLocked closes the least recently acquired idle File of all
// Tables and returns how many descriptors that gave back (0: none idle).
// Caller holds procFiles.mu.
func evictOldestLocked() int {
	for attempt := 0; attempt < 4; attempt++ {
		var victim *File
		var vt *Table
		for _, t := range procFiles.tables {
			t.mu.RLock()
			for _, f := range t.byPath {
				if f.refs.Load() == 0 && (victim == nil || f.lastUse.Load() < victim.lastUse.Load()) {
					victim, vt = f, t
				}
			}
			t.mu.RUnlock()
		}
		if victim == nil {
			return 0
		}
		vt.mu.Lock()
		// Between the scan and the write lock a reader may have taken it.
		if vt.byPath[victim.Path] == victim && victim.refs.Load() == 0 {
			n := victim.fds()
			vt.detachLocked(victim)
			vt.st.FilesEvicted.Add(1)
			vt.mu.Unlock()
			return n
		}
		vt.mu.Unlock()
	}
	return 0
}

// fds is how many descriptors f holds (1, or 2 with its O_DIRECT one).
func (f *File) fds() int {
	if f.closed.Load() {
		return 0
	}
	f.dmu.Lock()
	defer f.dmu.Unlock()
	if f.dReady.Load() && f.dfd >= 0 {
		return 2
	}
	return 1
}

// keepBudget trims the process to its budget after a descriptor was opened.
// One getrlimit per open: the host may have lowered the limit since.
func keepBudget() {
	if b, _ := Budget(); procFiles.held.Load() > int64(b) {
		trimProcess(b)
	}
}

// isFDLimit reports whether err is the process (EMFILE) or system (ENFILE)
// descriptor limit.
func isFDLimit(err error) bool { return err == unix.EMFILE || err == unix.ENFILE }

// openReclaiming runs open; when it fails with EMFILE or ENFILE it gives
// descriptors back (idle Files, least recently used first: half of what the
// process holds, then every idle one) and retries. A limit that persists is
// errs.IO "too many open files (limit N, MemTier holds M)".
func openReclaiming(path string, open func() (int, error)) (int, error) {
	fd, err := open()
	if !isFDLimit(err) {
		return fd, err
	}
	b, _ := Budget()
	half := int(procFiles.held.Load()) / 2
	if half > b {
		half = b
	}
	for _, keep := range []int{half, 0} {
		trimProcess(keep)
		if fd, err = open(); !isFDLimit(err) {
			return fd, err
		}
	}
	_, soft := Budget()
	return -1, &errs.Error{Code: errs.IO, Op: "open", Path: path, Offset: -1,
		Msg: limitText(err, soft)}
}

func limitText(err error, soft uint64) string {
	what := "too many open files"
	if err == unix.ENFILE {
		what = "too many open files in the system"
	}
	return what + " (limit " + strconv.FormatUint(soft, 10) + ", MemTier holds " + strconv.Itoa(Held()) + ")"
}
