package gpu

import (
	"errors"
	"testing"

	"github.com/memtier/memtier/runtime/logx"
)

// TestLogGDSFallback: each GDS attempt served staged prints one MEMTIER_LOG
// warn line naming the file, the reason and the error.
func TestLogGDSFallback(t *testing.T) {
	tg := NewTarget(TargetOptions{})
	lines, restore := logx.Capture(logx.Warn)
	tg.NoteFallback(7, "/data/w.bin", "odirect_refused", errors.New("the file system refuses O_DIRECT"), true)
	restore()
	want := "memtier: warn: /data/w.bin: GDS fell back to staged reads (odirect_refused): the file system refuses O_DIRECT\n"
	if lines() != want {
		t.Fatalf("got %q, want %q", lines(), want)
	}
	if tg.FileFallback(7) != "odirect_refused" {
		t.Fatalf("FileFallback = %q", tg.FileFallback(7))
	}
}
