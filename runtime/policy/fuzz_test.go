package policy

import "testing"

// FuzzPolicy checks invariants of the table for arbitrary inputs: a valid path,
// admission equal to Admit, CUDA without GPU never served, O_DIRECT never
// chosen when the mode is OFF or the hint says BUFFERED, and residency
// and the device probe mattering only when NeedsResidency says so, and
// O_DIRECT in AUTO mode only for READ_ONCE or the DIRECT hint.
func FuzzPolicy(f *testing.F) {
	f.Add(uint64(4096), uint64(0), uint64(0), uint32(0), 0, 0, false, false)
	f.Add(uint64(64<<20), uint64(0), uint64(1<<20), uint32(2), 0, 0, true, false)
	f.Add(uint64(1), uint64(1), uint64(0), uint32(15), 3, 1, true, true)
	f.Fuzz(func(t *testing.T, size, cached, resident uint64, flags uint32, mode, target int, known, refused bool) {
		c := base
		c.DirectMode = ((mode % 4) + 4) % 4
		in := Input{Target: ((target % 2) + 2) % 2, Size: size, Flags: flags & (AllFlags | ReadNoAdmit), CachedBytes: cached,
			ResidentBytes: resident, ResidentKnown: known, DirectRefused: refused,
			Probe: Probe{uint32(resident >> 7), uint32(cached >> 9)}}
		d := Decide(c, in)
		if d.Path < PathCache || d.Path > PathNone || d.Row < 1 || d.Row > 8 && d.Row != 16 && d.Row != 17 {
			t.Fatalf("bad decision %+v", d)
		}
		if in.Target == TargetCUDA && d.Path != PathNone {
			t.Fatalf("CUDA served without GPU: %+v", d)
		}
		if d.Path == PathDirect && (c.DirectMode == DirectOff || in.Flags&ReadBuffered != 0) {
			t.Fatalf("direct chosen against mode/hint: %+v", d)
		}
		if d.Row >= 4 && d.Admit != Admit(c, size, in.Flags) {
			t.Fatalf("admit %v != Admit()", d.Admit)
		}
		if d.Row >= 4 && !NeedsResidency(c, in) {
			alt := in
			alt.ResidentKnown, alt.ResidentBytes = !known, size
			alt.Probe = Probe{alt.Probe.BufferedMBps + 1, alt.Probe.DirectMBps * 3}
			if Decide(c, alt).Path != d.Path {
				t.Fatalf("residency or probe changed the path though NeedsResidency is false: %+v", in)
			}
		}
		// Only READ_ONCE opts out of the page cache: any other read that is
		// not hinted DIRECT and not in an O_DIRECT mode stays buffered.
		if d.Path == PathDirect && in.Flags&(ReadOnce|ReadDirect) == 0 && c.DirectMode == DirectAuto {
			t.Fatalf("a read without READ_ONCE went O_DIRECT in AUTO mode: %+v", d)
		}
		if (d.Row == 7 || d.Row == 16) != (NeedsResidency(c, in) && (!in.ResidentKnown || in.ResidentBytes*2 < size-cached)) {
			t.Fatalf("row %d for %+v", d.Row, in)
		}
		if NeedsProbe(c, in) && (d.Row != 7 || in.Probe.Measured()) {
			t.Fatalf("NeedsProbe for row %d probe %+v", d.Row, in.Probe)
		}
	})
}
