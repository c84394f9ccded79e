package policy

import (
	"strings"
	"testing"
)

var base = Config{CacheEnabled: true, AdmitMax: 16 << 20, DirectThreshold: 8 << 20, DirectMode: DirectAuto}

func TestDecide_Table(t *testing.T) {
	cases := []struct {
		name  string
		cfg   func(*Config)
		in    Input
		path  int
		row   int
		admit bool
	}{
		{"cuda without gpu", nil, Input{Target: TargetCUDA, Size: 4096}, PathNone, 1, false},
		{"empty", nil, Input{Size: 0}, PathNone, 2, false},
		{"fully cached", nil, Input{Size: 4096, CachedBytes: 4096}, PathCache, 3, false},
		{"small warm admitted", nil, Input{Size: 4096, ResidentKnown: true, ResidentBytes: 4096}, PathBuffered, 8, true},
		{"read once not admitted", nil, Input{Size: 4096, Flags: ReadOnce}, PathBuffered, 8, false},
		{"large not admitted", nil, Input{Size: 64 << 20, ResidentKnown: true, ResidentBytes: 64 << 20}, PathBuffered, 8, false},
		{"large will reuse admitted", nil, Input{Size: 64 << 20, Flags: ReadWillUse, ResidentKnown: true, ResidentBytes: 64 << 20}, PathBuffered, 8, true},
		{"large cold default stays buffered", nil, Input{Size: 64 << 20, ResidentKnown: true}, PathBuffered, 17, false},
		{"large unknown residency default buffered", nil, Input{Size: 64 << 20}, PathBuffered, 17, false},
		{"exactly half resident is cold", nil, Input{Size: 16 << 20, ResidentKnown: true, ResidentBytes: 8<<20 - 1}, PathBuffered, 17, true},
		{"exactly half resident is warm", nil, Input{Size: 16 << 20, ResidentKnown: true, ResidentBytes: 8 << 20}, PathBuffered, 8, true},
		{"no admit keeps page cache", nil, Input{Size: 64 << 20, Flags: ReadNoAdmit}, PathBuffered, 17, false},
		{"no admit small not admitted", nil, Input{Size: 4096, Flags: ReadNoAdmit}, PathBuffered, 8, false},
		{"read once cold direct unprobed", nil, Input{Size: 64 << 20, Flags: ReadOnce, ResidentKnown: true}, PathDirect, 7, false},
		{"read once unknown residency direct", nil, Input{Size: 64 << 20, Flags: ReadOnce}, PathDirect, 7, false},
		{"read once cold probe direct faster", nil, Input{Size: 64 << 20, Flags: ReadOnce, Probe: Probe{2000, 1500}}, PathDirect, 7, false},
		{"read once cold probe tie goes direct", nil, Input{Size: 64 << 20, Flags: ReadOnce, Probe: Probe{2000, 2200}}, PathDirect, 7, false},
		{"read once cold probe buffered faster", nil, Input{Size: 64 << 20, Flags: ReadOnce, Probe: Probe{2000, 2201}}, PathBuffered, 16, false},
		{"read once half probed is unprobed", nil, Input{Size: 64 << 20, Flags: ReadOnce, Probe: Probe{0, 9000}}, PathDirect, 7, false},
		{"read once warm buffered", nil, Input{Size: 64 << 20, Flags: ReadOnce, ResidentKnown: true, ResidentBytes: 40 << 20, Probe: Probe{1, 9000}}, PathBuffered, 8, false},
		{"read once small buffered", nil, Input{Size: 8<<20 - 1, Flags: ReadOnce}, PathBuffered, 8, false},
		{"read once will reuse not admitted", nil, Input{Size: 4096, Flags: ReadOnce | ReadWillUse}, PathBuffered, 8, false},
		{"probe ignored by hint direct", nil, Input{Size: 64 << 20, Flags: ReadDirect | ReadOnce, Probe: Probe{1, 9000}}, PathDirect, 6, false},
		{"probe ignored by always", func(c *Config) { c.DirectMode = DirectAlways }, Input{Size: 64 << 20, Flags: ReadOnce, Probe: Probe{1, 9000}}, PathDirect, 6, false},
		{"probe ignored by hint buffered", nil, Input{Size: 64 << 20, Flags: ReadBuffered | ReadOnce, Probe: Probe{9000, 1}}, PathBuffered, 4, false},
		{"refused read once cold falls back", nil, Input{Size: 64 << 20, Flags: ReadOnce, DirectRefused: true}, PathBuffered, 5, false},
		{"hint buffered", nil, Input{Size: 64 << 20, Flags: ReadBuffered}, PathBuffered, 4, false},
		{"direct off", func(c *Config) { c.DirectMode = DirectOff }, Input{Size: 64 << 20}, PathBuffered, 4, false},
		{"refused falls back", func(c *Config) { c.DirectMode = DirectAlways }, Input{Size: 4096, DirectRefused: true}, PathBuffered, 5, true},
		{"refused required stays direct", func(c *Config) { c.DirectMode = DirectRequired }, Input{Size: 4096, DirectRefused: true}, PathDirect, 6, true},
		{"always", func(c *Config) { c.DirectMode = DirectAlways }, Input{Size: 1}, PathDirect, 6, true},
		{"hint direct small", nil, Input{Size: 4096, Flags: ReadDirect}, PathDirect, 6, true},
		{"cache off never admits", func(c *Config) { c.CacheEnabled = false }, Input{Size: 4096, Flags: ReadWillUse}, PathBuffered, 8, false},
		{"partly cached small remainder", nil, Input{Size: 64 << 20, CachedBytes: 60 << 20}, PathBuffered, 8, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			if tc.cfg != nil {
				tc.cfg(&c)
			}
			d := Decide(c, tc.in)
			if d.Path != tc.path || d.Row != tc.row || d.Admit != tc.admit {
				t.Fatalf("got path=%d row=%d admit=%v (%s), want path=%d row=%d admit=%v",
					d.Path, d.Row, d.Admit, d.Reason, tc.path, tc.row, tc.admit)
			}
			if d.Reason == "" {
				t.Fatal("empty reason")
			}
		})
	}
}

func TestNeedsResidency_MatchesDecide(t *testing.T) {
	// Whenever NeedsResidency is false, the residency inputs must not change the decision.
	for _, size := range []uint64{0, 1, 8<<20 - 1, 8 << 20, 64 << 20} {
		for flags := uint32(0); flags <= AllFlags; flags++ {
			in := Input{Size: size, Flags: flags}
			if NeedsResidency(base, in) {
				continue
			}
			cold := Decide(base, Input{Size: size, Flags: flags, ResidentKnown: true})
			warm := Decide(base, Input{Size: size, Flags: flags, ResidentKnown: true, ResidentBytes: size})
			if cold.Path != warm.Path {
				t.Fatalf("size %d flags %d: residency changed path though NeedsResidency=false", size, flags)
			}
		}
	}
}

func TestNeedsProbe(t *testing.T) {
	cold := Input{Size: 64 << 20, Flags: ReadOnce, ResidentKnown: true}
	if !NeedsProbe(base, cold) {
		t.Fatal("a cold large READ_ONCE read on an unprobed device must probe")
	}
	for name, in := range map[string]Input{
		"probed":   {Size: 64 << 20, Flags: ReadOnce, Probe: Probe{100, 200}},
		"default":  {Size: 64 << 20},
		"no admit": {Size: 64 << 20, Flags: ReadNoAdmit},
		"warm":     {Size: 64 << 20, Flags: ReadOnce, ResidentKnown: true, ResidentBytes: 64 << 20},
		"small":    {Size: 1 << 20, Flags: ReadOnce},
		"hint":     {Size: 64 << 20, Flags: ReadOnce | ReadDirect},
		"refused":  {Size: 64 << 20, Flags: ReadOnce, DirectRefused: true},
		"cached":   {Size: 64 << 20, Flags: ReadOnce, CachedBytes: 60 << 20},
		"cuda":     {Target: TargetCUDA, Size: 64 << 20, Flags: ReadOnce},
	} {
		if NeedsProbe(base, in) {
			t.Errorf("%s: NeedsProbe true", name)
		}
	}
	for _, mode := range []int{DirectOff, DirectAlways, DirectRequired} {
		c := base
		c.DirectMode = mode
		if NeedsProbe(c, cold) {
			t.Errorf("direct_mode %d: NeedsProbe true", mode)
		}
	}
}

func TestDetail_Probe(t *testing.T) {
	in := Input{Size: 1 << 40, Flags: ReadOnce, ResidentBytes: 1 << 39, CachedBytes: 1 << 20}
	d := Decide(base, in)
	if s := Detail(base, in, d); d.Row != 7 || !strings.Contains(s, "device not probed") {
		t.Fatalf("row %d detail %q", d.Row, s)
	}
	in.Probe = Probe{4294967295, 4294967295}
	d = Decide(base, in)
	s := Detail(base, in, d)
	if !strings.Contains(s, "probe: direct 4294967295, buffered 4294967295 MB/s") {
		t.Fatalf("detail %q", s)
	}
	// explain adds "row N: " and its span summary; all of it must fit the
	// 256-byte reason of memtier_decision_t.
	for _, f := range []uint32{0, ReadOnce} {
		for _, p := range []Probe{{}, {4294967295, 4294967295}, {1, 4294967295}} {
			in := Input{Size: 1<<63 - 1, Flags: f, CachedBytes: 1<<62 + 1, ResidentBytes: 1<<62 - 1, Probe: p}
			c := base
			c.DirectThreshold = 1<<62 - 1
			d := Decide(c, in)
			if n := len(Detail(c, in, d)) + len("row 17: ; source: 9223372036854775807 bytes in 1 spans"); n > 255 {
				t.Errorf("row %d: explain text of %d bytes: %q", d.Row, n, Detail(c, in, d))
			}
		}
	}
}
