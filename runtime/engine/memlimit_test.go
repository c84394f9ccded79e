package engine

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
)

// fakeCgroup makes a cgroup v2 tree whose process cgroup /job has memory.max
// = limit and points MEMTIER_CGROUP_ROOT at it for the test.
func fakeCgroup(t *testing.T, limit string) {
	t.Helper()
	root := t.TempDir()
	for p, s := range map[string]string{
		"proc/self/cgroup":                 "0::/job\n",
		"sys/fs/cgroup/cgroup.controllers": "memory\n",
		"sys/fs/cgroup/job/memory.max":     limit + "\n",
	} {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(config.CgroupRootVar, root)
}

// Field case N06 (tests/field_cases.md): inside a 768 MiB memory cgroup the default budget is
// 25% of it, and an explicit 1 GiB is refused naming the limit.
func TestNewBoundedByCgroupLimit(t *testing.T) {
	fakeCgroup(t, "805306368")
	c, err := New(config.LimitedDefaults())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Options().CacheBytes; got != 192<<20 {
		t.Fatalf("default cache_bytes %d, want %d", got, 192<<20)
	}
	if got := c.Stats().CacheBudgetBytes; got != 192<<20 {
		t.Fatalf("stats cache budget %d, want %d", got, 192<<20)
	}
	want := config.MemLimit{Bytes: 805306368, Source: "cgroup v2 memory.max at /sys/fs/cgroup/job", Cgroup: true}
	if got := c.MemLimit(); got != want {
		t.Fatalf("MemLimit = %+v, want %+v", got, want)
	}

	o := config.Defaults()
	o.CacheBytes = 1 << 30
	_, err = New(o)
	if code(err) != errs.InvalidArg {
		t.Fatalf("New(cache_bytes 1 GiB) = %v, want InvalidArg", err)
	}
	if msg := err.Error(); msg != "memtier_init: cache_bytes 1073741824 exceeds 201326592 bytes, 25% of the "+
		"memory limit of 805306368 bytes (cgroup v2 memory.max at /sys/fs/cgroup/job): the cache counts "+
		"against that limit and the kernel cannot reclaim it; set cache_bytes to at most 201326592" {
		t.Fatalf("message %q", msg)
	}

	// exactly the share, and no cache at all, are accepted
	o.CacheBytes = 192 << 20
	c2, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
	o.CacheBytes, o.CacheEnabled = 1<<30, false
	c3, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	c3.Close()
}

// Without a cgroup limit the rule is the one from before: the default stays
// 1 GiB, and only a budget above host RAM is refused.
func TestNewWithoutCgroupLimit(t *testing.T) {
	fakeCgroup(t, "max")
	o := config.LimitedDefaults()
	if o.CacheBytes != 1<<30 {
		t.Fatalf("default cache_bytes %d, want %d", o.CacheBytes, 1<<30)
	}
	ram := config.HostRAM()
	if ram == 0 {
		t.Skip("sysinfo gives no host RAM")
	}
	o.CacheBytes = ram + 1<<30
	_, err := New(o)
	if code(err) != errs.InvalidArg || err.Error() != "memtier_init: cache_bytes "+strconv.FormatUint(ram+1<<30, 10)+
		" exceeds the machine's physical memory ("+strconv.FormatUint(ram, 10)+" bytes)" {
		t.Fatalf("New(host RAM + 1 GiB) = %v", err)
	}
	c := newCtx(t, nil)
	if got := c.MemLimit(); got != (config.MemLimit{Bytes: ram, Source: "host RAM"}) {
		t.Fatalf("MemLimit = %+v", got)
	}
}
