package config

import (
	"os"
	"path/filepath"
	"testing"
)

// fakeTree writes files (path relative to the tree -> content) under a temp
// dir and returns the dir.
func fakeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, s := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const hostRAM = 64 << 30

func TestMemLimitCases(t *testing.T) {
	v2 := map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpu memory\n"}
	with := func(base map[string]string, more map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range more {
			m[k] = v
		}
		return m
	}
	host := MemLimit{Bytes: hostRAM, Source: "host RAM"}
	for _, c := range []struct {
		name  string
		files map[string]string
		want  MemLimit
	}{
		{"v2 memory.max", with(v2, map[string]string{
			"proc/self/cgroup":            "0::/x\n",
			"sys/fs/cgroup/x/memory.max":  "805306368\n",
			"sys/fs/cgroup/x/memory.high": "max\n",
		}), MemLimit{805306368, "cgroup v2 memory.max at /sys/fs/cgroup/x", true}},
		{"v2 lower limit on an ancestor", with(v2, map[string]string{
			"proc/self/cgroup":               "0::/a/b/c\n",
			"sys/fs/cgroup/a/b/c/memory.max": "max\n",
			"sys/fs/cgroup/a/b/memory.max":   "2147483648\n",
			"sys/fs/cgroup/a/memory.max":     "805306368\n",
		}), MemLimit{805306368, "cgroup v2 memory.max at /sys/fs/cgroup/a", true}},
		{"v2 memory.high below memory.max", with(v2, map[string]string{
			"proc/self/cgroup":            "0::/x\n",
			"sys/fs/cgroup/x/memory.max":  "1073741824\n",
			"sys/fs/cgroup/x/memory.high": "536870912\n",
		}), MemLimit{536870912, "cgroup v2 memory.high at /sys/fs/cgroup/x", true}},
		{"v2 max everywhere", with(v2, map[string]string{
			"proc/self/cgroup":            "0::/x\n",
			"sys/fs/cgroup/x/memory.max":  "max\n",
			"sys/fs/cgroup/x/memory.high": "max\n",
		}), host},
		{"v1 memory.limit_in_bytes", map[string]string{
			"proc/self/cgroup": "12:pids:/docker/c1\n4:memory:/docker/c1\n0::/\n",
			"sys/fs/cgroup/memory/docker/c1/memory.limit_in_bytes": "805306368\n",
			"sys/fs/cgroup/memory/docker/memory.limit_in_bytes":    "9223372036854771712\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":           "9223372036854771712\n",
		}, MemLimit{805306368, "cgroup v1 memory.limit_in_bytes at /sys/fs/cgroup/memory/docker/c1", true}},
		{"v1 no limit (page-counter max, 64 KiB pages)", map[string]string{
			"proc/self/cgroup": "4:cpu,memory:/j\n",
			"sys/fs/cgroup/memory/j/memory.limit_in_bytes": "9223372036854710272\n",
		}, host},
		{"v1 limit above host RAM", map[string]string{
			"proc/self/cgroup": "4:memory:/j\n",
			"sys/fs/cgroup/memory/j/memory.limit_in_bytes": "137438953472\n",
		}, host},
		{"missing files", map[string]string{}, host},
		{"no memory.max in the process's cgroup", with(v2, map[string]string{
			"proc/self/cgroup": "0::/x\n",
		}), host},
		{"garbage", with(v2, map[string]string{
			"proc/self/cgroup":            "garbage\n::\n0::relative\n0::/x\n",
			"sys/fs/cgroup/x/memory.max":  "-5\n",
			"sys/fs/cgroup/x/memory.high": "\x00\xff 12 GiB",
		}), host},
		{"empty limit files", with(v2, map[string]string{
			"proc/self/cgroup":            "0::/x\n",
			"sys/fs/cgroup/x/memory.max":  "",
			"sys/fs/cgroup/x/memory.high": "0\n",
		}), host},
		{"a path with .. stays under the mount", with(v2, map[string]string{
			"proc/self/cgroup":           "0::/../../x\n",
			"sys/fs/cgroup/x/memory.max": "805306368\n",
		}), MemLimit{805306368, "cgroup v2 memory.max at /sys/fs/cgroup/x", true}},
		{"hybrid: v2 at /sys/fs/cgroup/unified, v1 memory lower", map[string]string{
			"proc/self/cgroup":                             "4:memory:/s\n0::/s\n",
			"sys/fs/cgroup/unified/s/memory.max":           "1073741824\n",
			"sys/fs/cgroup/memory/s/memory.limit_in_bytes": "805306368\n",
		}, MemLimit{805306368, "cgroup v1 memory.limit_in_bytes at /sys/fs/cgroup/memory/s", true}},
		{"mountinfo: subtree mount, escaped space", map[string]string{
			"proc/self/cgroup": "0::/kubepods/pod1/c1\n",
			"proc/self/mountinfo": "22 1 0:20 / / rw - ext4 /dev/sda1 rw\n" +
				"30 22 0:26 /kubepods/pod1 /cg\\040root rw,nosuid shared:4 - cgroup2 cgroup2 rw\n" +
				"31 22 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
			"cg root/c1/memory.max":       "max\n",
			"cg root/memory.max":          "805306368\n",
			"sys/fs/cgroup/c1/memory.max": "1\n", // the standard point is not where mountinfo says
		}, MemLimit{805306368, "cgroup v2 memory.max at /cg root", true}},
		{"mountinfo: process outside the mounted subtree", map[string]string{
			"proc/self/cgroup":    "0::/other\n",
			"proc/self/mountinfo": "30 22 0:26 /mine /cg rw - cgroup2 cgroup2 rw\n",
			"cg/memory.max":       "805306368\n",
		}, MemLimit{805306368, "cgroup v2 memory.max at /cg", true}},
		{"mountinfo: v1 mount without the memory controller is ignored", map[string]string{
			"proc/self/cgroup":           "3:cpu:/j\n",
			"proc/self/mountinfo":        "31 22 0:27 / /cg rw - cgroup cgroup rw,cpu\n",
			"cg/j/memory.limit_in_bytes": "805306368\n",
		}, host},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ReadMemLimitAt(fakeTree(t, c.files), hostRAM)
			if got != c.want {
				t.Fatalf("ReadMemLimitAt = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestMemLimitNoHostRAM(t *testing.T) {
	if got := ReadMemLimitAt(t.TempDir(), 0); got != (MemLimit{}) {
		t.Fatalf("ReadMemLimitAt(empty, 0) = %+v, want the zero MemLimit", got)
	}
	if s := (MemLimit{}).String(); s != "none" {
		t.Fatalf("String = %q", s)
	}
	if c := (MemLimit{}).CacheCap(); c != 0 {
		t.Fatalf("CacheCap = %d", c)
	}
}

func TestReadMemLimitUsesOverride(t *testing.T) {
	root := fakeTree(t, map[string]string{
		"proc/self/cgroup":                 "0::/x\n",
		"sys/fs/cgroup/cgroup.controllers": "memory\n",
		"sys/fs/cgroup/x/memory.max":       "805306368\n",
	})
	t.Setenv(CgroupRootVar, root)
	want := MemLimit{805306368, "cgroup v2 memory.max at /sys/fs/cgroup/x", true}
	if got := ReadMemLimit(); got != want {
		t.Fatalf("ReadMemLimit = %+v, want %+v", got, want)
	}
	if s := want.String(); s != "805306368 bytes (cgroup v2 memory.max at /sys/fs/cgroup/x)" {
		t.Fatalf("String = %q", s)
	}
	o := LimitedDefaults()
	if o.CacheBytes != 192<<20 || !o.CacheEnabled {
		t.Fatalf("LimitedDefaults cache_bytes %d enabled %v, want %d true", o.CacheBytes, o.CacheEnabled, 192<<20)
	}
}

func TestBoundDefaultCache(t *testing.T) {
	cg := func(n uint64) MemLimit { return MemLimit{Bytes: n, Source: "cgroup v2 memory.max at /x", Cgroup: true} }
	for _, c := range []struct {
		lim     MemLimit
		bytes   uint64
		enabled bool
	}{
		{MemLimit{}, 1 << 30, true},                                   // no limit: unchanged
		{MemLimit{Bytes: 2 << 30, Source: "host RAM"}, 1 << 30, true}, // host RAM bounds no default
		{cg(8 << 30), 1 << 30, true},                                  // share above the default
		{cg(805306368), 192 << 20, true},
		{cg(100<<20 + 12345), 25 << 20, true}, // rounded down to whole 64 KiB blocks
		{cg(128 << 10), 1 << 30, false},       // share below one block: cache off
	} {
		o := Defaults()
		BoundDefaultCache(&o, c.lim)
		if o.CacheBytes != c.bytes || o.CacheEnabled != c.enabled {
			t.Errorf("limit %v: cache_bytes %d enabled %v, want %d %v", c.lim, o.CacheBytes, o.CacheEnabled, c.bytes, c.enabled)
		}
	}
}
