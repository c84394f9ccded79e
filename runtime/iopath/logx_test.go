package iopath

import (
	"path/filepath"
	"testing"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/logx"
	"github.com/memtier/memtier/runtime/stats"
)

// TestLogDirectFallback: a file whose O_DIRECT open is refused is read
// buffered with one MEMTIER_LOG warn line (none when logging is off).
func TestLogDirectFallback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.bin")
	writePFile(t, path, 10000)
	for _, tc := range []struct {
		level int32
		want  string
	}{
		{logx.Off, ""},
		{logx.Warn, "memtier: warn: " + path + ": the file system refused O_DIRECT (refused at open): reading it buffered\n"},
	} {
		var st stats.Counters
		r := newReader(t, config.Defaults(), &st)
		f := openFile(t, path)
		f.MarkDirectRefused()
		lines, restore := logx.Capture(tc.level)
		g := newGuarded(3, 0)
		n, fellBack, err := r.ReadDirect(f, g.dst(), 4097, false)
		restore()
		if err != nil || !fellBack {
			t.Fatalf("err %v fellBack %v", err, fellBack)
		}
		g.check(t, "refused (4097, 3)", n, pattern(4097, 3))
		if lines() != tc.want {
			t.Errorf("level %d: got %q, want %q", tc.level, lines(), tc.want)
		}
	}
}
