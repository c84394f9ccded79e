package engine

import (
	"testing"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/logx"
	"github.com/memtier/memtier/runtime/policy"
)

// TestLogUringUnavailable: a readv on a source that cannot batch prints one
// MEMTIER_LOG warn line naming why (the same case as TestReadV_UringUnavailable).
func TestLogUringUnavailable(t *testing.T) {
	c := uringCtx(t, false)
	c.src = refusingSource{c.src.(*sources).local}
	uc := newUringCase(t, c)
	lines, restore := logx.Capture(logx.Warn)
	err := c.ReadV(uc.v, 0, 0)
	restore()
	if code(err) != errs.EOF {
		t.Fatalf("readv: %v", err)
	}
	uc.check(t)
	want := "memtier: warn: io_uring unavailable (io_uring_setup: operation not permitted): readv reads with one preadv2 per element\n"
	if lines() != want {
		t.Fatalf("got %q, want %q", lines(), want)
	}
}

// TestLogReadDecisions: the info and debug lines of a read with a known path
// (above cache_admit_max_bytes: not admitted; small: buffered), none at warn.
func TestLogReadDecisions(t *testing.T) {
	path := writeP(t, 1<<20)
	c := newCtx(t, func(o *config.Options) { o.CacheAdmitMaxBytes = 4096 })
	admit := "memtier: info: " + path + " [0, 8192): not admitted to the DRAM cache: 8192 bytes exceed " +
		"cache_admit_max_bytes 4096 (hint READ_WILL_REUSE to admit)\n"
	small := "memtier: debug: " + path + " [0, 8192): buffered, row 8: small: uncached bytes below direct_threshold\n"
	for _, tc := range []struct {
		level int32
		want  string
	}{
		{logx.Warn, ""},
		{logx.Info, admit},
		{logx.Debug, admit + small},
	} {
		lines, restore := logx.Capture(tc.level)
		dst := make([]byte, 8192)
		err := c.Read(path, 0, 8192, dst, policy.TargetCPU, 0)
		restore()
		if err != nil {
			t.Fatal(err)
		}
		if lines() != tc.want {
			t.Errorf("level %d: got\n%s\nwant\n%s", tc.level, lines(), tc.want)
		}
	}
}
