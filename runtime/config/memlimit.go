package config

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// CgroupRootVar names the test-only variable that points the memory-limit
// lookup at a fake file system tree instead of "/" (see ReadMemLimitAt).
const CgroupRootVar = "MEMTIER_CGROUP_ROOT"

// CacheLimitShareDivisor: a DRAM cache may take 1/CacheLimitShareDivisor (25%)
// of a cgroup memory limit. The cache is anonymous memory the kernel cannot
// reclaim, and the page cache of the same file bytes counts against the same
// cgroup next to it (field case N06, tests/field_cases.md); the rest of the
// limit belongs to the application that the data is read for (the
// interpreter, torch, the arrays the bytes land in), so a quarter is left to
// the cache.
const CacheLimitShareDivisor = 4

// v1NoLimit: a cgroup v1 memory.limit_in_bytes at or above this (4 EiB) means
// "no limit". The kernel writes PAGE_COUNTER_MAX pages, LONG_MAX rounded down
// to the page size (9223372036854771712 with 4 KiB pages), which differs by
// page size, so a threshold is used rather than one value.
const v1NoLimit = 1 << 62

// MemLimit is the smallest memory limit that applies to this process: the
// memory cgroup (v2 memory.max or memory.high, v1 memory.limit_in_bytes) of
// the process and of each ancestor, and the host's RAM.
type MemLimit struct {
	Bytes  uint64 // the limit in bytes; 0 = none known
	Source string // where it came from: "cgroup v2 memory.max at /sys/fs/cgroup/x", "host RAM", or "" when Bytes is 0
	Cgroup bool   // Bytes is a cgroup limit (false: host RAM or none)
}

// CacheCap is the largest DRAM cache budget, in bytes, that the limit allows:
// 1/CacheLimitShareDivisor of a cgroup limit; all of host RAM when the host
// is the only limit (the rule before cgroups were read: a budget above RAM can
// only end in the OOM killer); 0 = no bound. Safe for concurrent use.
func (l MemLimit) CacheCap() uint64 {
	if l.Cgroup {
		return l.Bytes / CacheLimitShareDivisor
	}
	return l.Bytes
}

// String is "805306368 bytes (cgroup v2 memory.max at /sys/fs/cgroup/x)", or
// "none" when no limit is known.
func (l MemLimit) String() string {
	if l.Bytes == 0 {
		return "none"
	}
	return fmt.Sprintf("%d bytes (%s)", l.Bytes, l.Source)
}

// LimitedDefaults returns Defaults() with the default DRAM cache budget
// bounded by ReadMemLimit: min(1 GiB, CacheCap) rounded down to a multiple of
// the default block; a cap below one block turns the default cache off. Host
// RAM alone bounds nothing here (the default stays 1 GiB, as before cgroups
// were read). Call it instead of Defaults where the defaults that a caller
// then overrides are made, so that an explicit budget can still be told from
// the default and refused. Reads files under /proc and /sys; safe for
// concurrent use.
func LimitedDefaults() Options {
	o := Defaults()
	BoundDefaultCache(&o, ReadMemLimit())
	return o
}

// BoundDefaultCache lowers o.CacheBytes to lim's cgroup share (rounded down
// to a multiple of o.CacheBlockBytes; below one block the cache is turned
// off). Only a cgroup limit lowers it. Apply it to defaults only, before
// FromEnv or a caller's values, never to an explicit budget (that one is
// checked, and refused, by engine.New).
func BoundDefaultCache(o *Options, lim MemLimit) {
	if !lim.Cgroup || o.CacheBytes <= lim.CacheCap() {
		return
	}
	c := lim.CacheCap()
	if o.CacheBlockBytes > 0 {
		c -= c % o.CacheBlockBytes
	}
	if c == 0 {
		o.CacheEnabled = false
		return
	}
	o.CacheBytes = c
}

// ReadMemLimitAt finds the smallest memory limit of the process as seen
// under root ("/" on a real system; a fake tree in tests), with hostRAM bytes
// as the last candidate (0 = unknown). It reads root/proc/self/cgroup (the
// process's cgroup per hierarchy) and root/proc/self/mountinfo (where each
// hierarchy is mounted; when that file is missing, the standard mount points
// root/sys/fs/cgroup for v2, or root/sys/fs/cgroup/unified, and
// root/sys/fs/cgroup/memory for v1), then walks from the process's cgroup up
// to the mount point. Values it cannot read or parse count as no limit:
// missing files, "max", garbage, v1's "unlimited" values. Sources name paths
// as seen from root (root itself is left out). Never fails, never panics;
// safe for concurrent use.
//
// The file formats are those of the kernel's documentation:
// https://docs.kernel.org/admin-guide/cgroup-v2.html (memory.max,
// memory.high, /proc/self/cgroup "0::PATH"),
// https://docs.kernel.org/admin-guide/cgroup-v1/memory.html
// (memory.limit_in_bytes) and
// https://docs.kernel.org/filesystems/proc.html (mountinfo).
func ReadMemLimitAt(root string, hostRAM uint64) MemLimit {
	var best MemLimit
	consider := func(n uint64, src string, cg bool) {
		if n > 0 && (best.Bytes == 0 || n < best.Bytes) {
			best = MemLimit{Bytes: n, Source: src, Cgroup: cg}
		}
	}
	for _, h := range cgroupDirs(root) {
		for dir := h.dir; ; dir = path.Dir(dir) {
			for _, name := range h.files() {
				if n, ok := readLimitFile(filepath.Join(root, dir, name), h.v1); ok {
					consider(n, fmt.Sprintf("cgroup v%d %s at %s", h.version(), name, dir), true)
				}
			}
			if dir == h.mount || dir == "/" || !strings.HasPrefix(dir, h.mount) {
				break
			}
		}
	}
	consider(hostRAM, "host RAM", false)
	return best
}

// hierarchy is one cgroup hierarchy that can hold memory limits: dir is the
// process's cgroup and mount its mount point, both as seen from root.
type hierarchy struct {
	v1         bool
	dir, mount string
}

func (h hierarchy) version() int {
	if h.v1 {
		return 1
	}
	return 2
}

func (h hierarchy) files() []string {
	if h.v1 {
		return []string{"memory.limit_in_bytes"}
	}
	return []string{"memory.max", "memory.high"}
}

// cgroupDirs lists the process's memory-capable hierarchies: the v2 one
// ("0::PATH") and the v1 one whose controllers include "memory".
func cgroupDirs(root string) []hierarchy {
	data, err := readSmall(filepath.Join(root, "proc/self/cgroup"), 64<<10)
	if err != nil {
		return nil
	}
	mounts := cgroupMounts(root)
	var out []hierarchy
	for _, line := range strings.Split(data, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			continue
		}
		v1 := parts[0] != "0" || parts[1] != ""
		if v1 && !hasWord(parts[1], "memory") {
			continue
		}
		for _, m := range mounts {
			if m.v1 != v1 {
				continue
			}
			rel := parts[2]
			// A mount of a subtree (a container's own cgroup): the path from
			// /proc/self/cgroup is relative to the hierarchy's root, so strip
			// the mounted subtree; a path outside it means the process is not
			// below this mount, whose top is then the closest dir we can see.
			if m.root != "/" {
				if r, ok := strings.CutPrefix(rel, m.root); ok && (r == "" || r[0] == '/') {
					rel = r
				} else {
					rel = "/"
				}
			}
			dir := path.Join(m.mount, path.Clean("/"+rel))
			out = append(out, hierarchy{v1: v1, dir: dir, mount: m.mount})
			break
		}
	}
	return out
}

// mount is one cgroup file system mount: root is the subtree of the hierarchy
// it shows, mount where it is mounted (as seen from the tree's root).
type mount struct {
	v1          bool
	root, mount string
}

// cgroupMounts reads root/proc/self/mountinfo for cgroup2 mounts and cgroup
// v1 mounts carrying the memory controller; without that file it assumes the
// standard mount points.
func cgroupMounts(root string) []mount {
	f, err := os.Open(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		var ms []mount
		v2 := "/sys/fs/cgroup"
		if _, err := os.Stat(filepath.Join(root, v2, "cgroup.controllers")); err != nil {
			v2 = "/sys/fs/cgroup/unified"
		}
		ms = append(ms, mount{root: "/", mount: v2}, mount{v1: true, root: "/", mount: "/sys/fs/cgroup/memory"})
		return ms
	}
	defer f.Close()
	var ms []mount
	r := bufio.NewReader(io.LimitReader(f, 64<<20))
	for {
		line, err := r.ReadString('\n')
		// "36 25 0:31 /root /mount/point rw,relatime shared:1 - cgroup2 cgroup2 rw"
		if pre, post, ok := strings.Cut(line, " - "); ok {
			a, b := strings.Fields(pre), strings.Fields(post)
			if len(a) >= 5 && len(b) >= 1 {
				switch {
				case b[0] == "cgroup2":
					ms = append(ms, mount{root: unescapeMount(a[3]), mount: unescapeMount(a[4])})
				case b[0] == "cgroup" && len(b) >= 3 && hasWord(b[2], "memory"):
					ms = append(ms, mount{v1: true, root: unescapeMount(a[3]), mount: unescapeMount(a[4])})
				}
			}
		}
		if err != nil {
			return ms
		}
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, \011,
// \012, \134) and cleans the path; anything malformed is left as written.
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return path.Clean(b.String())
}

// hasWord reports whether the comma-separated list holds w.
func hasWord(list, w string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == w {
			return true
		}
	}
	return false
}

// readLimitFile parses one limit file: a decimal byte count, or "max" (v2:
// none). v1 values at or above v1NoLimit mean none. ok is false for none,
// unreadable or unparsable.
func readLimitFile(p string, v1 bool) (uint64, bool) {
	s, err := readSmall(p, 64)
	if err != nil {
		return 0, false
	}
	s = strings.TrimSpace(s)
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || (v1 && n >= v1NoLimit) {
		return 0, false
	}
	return n, true
}

// readSmall reads at most limit bytes of a file (procfs and cgroupfs files
// report size 0, so os.ReadFile's size hint does not apply).
func readSmall(p string, limit int64) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit))
	return string(b), err
}
