// Package logx prints MemTier's policy decisions and fallbacks to stderr when
// MEMTIER_LOG asks for them: one line each, "memtier: LEVEL: text", rate
// limited per call site so that a hot loop cannot flood the terminal.
//
// Levels, from quietest: off (the default), warn (fallbacks: O_DIRECT
// refused, io_uring unavailable, GDS staged, remote throttling, the Python
// fork fallback), info (also the policy choices that change how bytes move:
// O_DIRECT chosen, cache admission refused, remote retries), debug (also
// every read's path decision). The level is read once, at first use, through
// the reader SetGetenv installs (libc getenv in the c-shared library, so a
// value Python put in os.environ before the first call is seen). An unknown
// value prints one warning and means off.
//
// Rate limit: each call site (its key) prints at most Burst lines, then one
// line per second, the next printed line saying how many it suppressed.
// All functions are safe for concurrent use; when the level is below a
// call's, the call costs one atomic load.
package logx

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Levels, in increasing verbosity.
const (
	Off   int32 = iota // nothing (default)
	Warn               // fallbacks
	Info               // and policy choices
	Debug              // and every read's decision
)

// Names are the MEMTIER_LOG values, indexed by level.
var Names = [...]string{Off: "off", Warn: "warn", Info: "info", Debug: "debug"}

// Burst is the lines a key prints before the one-per-second limit applies.
const Burst = 5

// Var is the environment variable that sets the level.
const Var = "MEMTIER_LOG"

var (
	level   atomic.Int32 // -1 until read
	getenv  atomic.Value // func(string) string
	out     io.Writer    = os.Stderr
	outMu   sync.Mutex
	keys    sync.Map // key -> *limit
	nowFunc = time.Now
)

func init() { level.Store(-1) }

// SetGetenv makes f the reader of MEMTIER_LOG (os.Getenv until then: in a
// c-shared library that sees only the environment at exec). Call it before
// the first log call; a level already read stays.
func SetGetenv(f func(string) string) { getenv.Store(f) }

// Level returns the level, reading MEMTIER_LOG on first use.
func Level() int32 {
	if l := level.Load(); l >= 0 {
		return l
	}
	return load()
}

// Enabled reports whether lines of level l print.
func Enabled(l int32) bool { return Level() >= l }

// Parse returns the level named s (case-insensitive, surrounding spaces
// ignored; "" is off) and whether s is a level name.
func Parse(s string) (int32, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return Off, true
	}
	for i, n := range Names {
		if s == n {
			return int32(i), true
		}
	}
	return Off, false
}

var loadMu sync.Mutex

func load() int32 {
	loadMu.Lock()
	defer loadMu.Unlock()
	if l := level.Load(); l >= 0 {
		return l
	}
	g := os.Getenv
	if f, ok := getenv.Load().(func(string) string); ok && f != nil {
		g = f
	}
	v := g(Var)
	l, ok := Parse(v)
	if !ok {
		write("memtier: warning: " + Var + "=" + v + " is not a level (off, warn, info, debug); logging is off\n")
	}
	level.Store(l)
	return l
}

// limit is one key's rate state.
type limit struct {
	mu         sync.Mutex
	printed    int       // lines printed in the burst
	last       time.Time // last line printed after the burst
	suppressed int       // lines dropped since the last printed one
}

// Warnf, Infof and Debugf print one line at their level (when enabled and
// key's rate allows): "memtier: LEVEL: " + the formatted text. key names the
// call site (e.g. "direct.fallback").
func Warnf(key, format string, args ...any) { logf(Warn, key, format, args...) }

// Infof: see Warnf.
func Infof(key, format string, args ...any) { logf(Info, key, format, args...) }

// Debugf: see Warnf.
func Debugf(key, format string, args ...any) { logf(Debug, key, format, args...) }

func logf(l int32, key, format string, args ...any) {
	if Level() < l {
		return
	}
	v, _ := keys.Load(key)
	if v == nil {
		v, _ = keys.LoadOrStore(key, &limit{})
	}
	lim := v.(*limit)
	lim.mu.Lock()
	var dropped int
	switch now := nowFunc(); {
	case lim.printed < Burst:
		lim.printed++
		lim.last = now
	case now.Sub(lim.last) >= time.Second:
		lim.last = now
		dropped, lim.suppressed = lim.suppressed, 0
	default:
		lim.suppressed++
		lim.mu.Unlock()
		return
	}
	lim.mu.Unlock()
	line := "memtier: " + Names[l] + ": " + fmt.Sprintf(format, args...)
	if dropped > 0 {
		line += fmt.Sprintf(" (%d similar lines suppressed)", dropped)
	}
	write(line + "\n")
}

func write(s string) {
	outMu.Lock()
	io.WriteString(out, s)
	outMu.Unlock()
}

// Capture is for tests of the packages that log: it sets the level to l,
// sends lines to a buffer and forgets every key's rate state. lines returns
// what was printed since; restore puts stderr and the environment's level
// back. Not for concurrent use with another Capture.
func Capture(l int32) (lines func() string, restore func()) {
	b := &syncBuffer{}
	outMu.Lock()
	prev := out
	out = b
	outMu.Unlock()
	keys.Range(func(k, _ any) bool { keys.Delete(k); return true })
	level.Store(l)
	return b.String, func() {
		outMu.Lock()
		out = prev
		outMu.Unlock()
		level.Store(-1)
	}
}

// syncBuffer is a strings.Builder written under outMu and read with its own lock.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
