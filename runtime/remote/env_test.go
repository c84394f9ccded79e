package remote

import (
	"strings"
	"testing"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
)

func TestEnv_PartBytesAndConcurrency(t *testing.T) {
	for _, tc := range []struct {
		part, conc string
		wantPart   int64
		wantConc   int
	}{
		{"", "", DefaultPartBytes, DefaultMaxConcurrency},
		{"16M", "8", 16 << 20, 8},
		{"32MiB", "1024", 32 << 20, 1024},
		{" 5242880 ", "1", MinPartBytes, 1},
		{"1G", "", MaxPartBytes, DefaultMaxConcurrency},
	} {
		o := fastOptions()
		o.PartBytes = 0
		o.Getenv = testEnv(EnvPartBytes, tc.part, EnvConcurrency, tc.conc)
		c := newClient(t, o)
		if got := c.Options(); got.PartBytes != tc.wantPart || got.MaxConcurrency != tc.wantConc {
			t.Errorf("%q %q: part %d conc %d, want %d %d", tc.part, tc.conc, got.PartBytes, got.MaxConcurrency, tc.wantPart, tc.wantConc)
		}
		if c.transport.MaxIdleConnsPerHost != tc.wantConc || c.transport.MaxConnsPerHost != tc.wantConc {
			t.Errorf("%q: idle/max conns per host %d/%d, want %d", tc.conc, c.transport.MaxIdleConnsPerHost, c.transport.MaxConnsPerHost, tc.wantConc)
		}
	}
}

// A field set in code wins over the variable.
func TestEnv_OptionWins(t *testing.T) {
	o := fastOptions()
	o.PartBytes, o.MaxConcurrency = 6<<20, 3
	o.Getenv = testEnv(EnvPartBytes, "64M", EnvConcurrency, "32")
	if got := newClient(t, o).Options(); got.PartBytes != 6<<20 || got.MaxConcurrency != 3 {
		t.Errorf("part %d conc %d, want 6291456 3", got.PartBytes, got.MaxConcurrency)
	}
}

func TestEnv_BadValues(t *testing.T) {
	for _, tc := range []struct{ name, val, want string }{
		{EnvPartBytes, "4M", `MEMTIER_REMOTE_PART_BYTES="4M": want a byte size from 5M to 1G`},
		{EnvPartBytes, "2G", `MEMTIER_REMOTE_PART_BYTES="2G"`},
		{EnvPartBytes, "8X", `MEMTIER_REMOTE_PART_BYTES="8X"`},
		{EnvConcurrency, "0", `MEMTIER_REMOTE_CONCURRENCY="0": want 1 to 1024`},
		{EnvConcurrency, "1025", `MEMTIER_REMOTE_CONCURRENCY="1025"`},
		{EnvConcurrency, "many", `MEMTIER_REMOTE_CONCURRENCY="many"`},
	} {
		o := fastOptions()
		o.PartBytes = 0
		o.Getenv = testEnv(tc.name, tc.val)
		_, err := NewClient(o)
		if errs.CodeOf(err) != errs.Format || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v, want Format with %q", tc.name, tc.val, err, tc.want)
		}
	}
}

func TestParseSizeForPartBytes(t *testing.T) { // the sizes MEMTIER_REMOTE_PART_BYTES takes
	for in, want := range map[string]uint64{"0": 0, "7": 7, "1k": 1 << 10, "2KiB": 2 << 10, "3m": 3 << 20, "4GiB": 4 << 30, "1T": 1 << 40} {
		if got, err := config.ParseSize(in); err != nil || got != want {
			t.Errorf("%q = %d %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "-1", "1.5M", "99999999999999999999", "16777216T"} {
		if got, err := config.ParseSize(in); err == nil {
			t.Errorf("%q = %d, want refused", in, got)
		}
	}
}
