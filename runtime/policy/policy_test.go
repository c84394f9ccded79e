package policy

import "testing"

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
		{"large cold direct", nil, Input{Size: 64 << 20, ResidentKnown: true}, PathDirect, 7, false},
		{"large unknown residency direct", nil, Input{Size: 64 << 20}, PathDirect, 7, false},
		{"exactly half resident is cold", nil, Input{Size: 16 << 20, ResidentKnown: true, ResidentBytes: 8<<20 - 1}, PathDirect, 7, true},
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
