package engine

import (
	"testing"

	"github.com/memtier/memtier/runtime/objects"
)

// A member list survives its encoding exactly; a blob of another format,
// cut short, with trailing bytes or a member the rules of ParseTar refuse
// (an offset off the 512-byte grid, out of order, data past the end, an
// empty name, a NUL in it) decodes to nil, so the shard is parsed again.
func TestTarIndexRoundTripAndRefusals(t *testing.T) {
	ms := []objects.TarMember{{Name: "a/0001.jpg", Offset: 512, Size: 70000}, {Name: "a/0001.cls", Offset: 71680, Size: 1},
		{Name: "dup", Offset: 72704, Size: 0}, {Name: "dup", Offset: 73216, Size: 9}}
	const size = 74240
	b := encodeTarIndex(ms)
	got := decodeTarIndex(b, size)
	if len(got) != len(ms) {
		t.Fatalf("decoded %d members, want %d", len(got), len(ms))
	}
	for i := range ms {
		if got[i] != ms[i] {
			t.Fatalf("member %d: %+v, want %+v", i, got[i], ms[i])
		}
	}
	if m := decodeTarIndex(encodeTarIndex(nil), 0); m == nil || len(m) != 0 {
		t.Fatalf("empty list: %v, want an empty list", m)
	}
	bad := func(what string, m []objects.TarMember) {
		t.Helper()
		if decodeTarIndex(encodeTarIndex(m), size) != nil {
			t.Fatalf("%s: decoded, want nil", what)
		}
	}
	bad("offset off the grid", []objects.TarMember{{Name: "x", Offset: 513, Size: 1}})
	bad("out of order", []objects.TarMember{{Name: "x", Offset: 1024, Size: 1}, {Name: "y", Offset: 512, Size: 1}})
	bad("past the end", []objects.TarMember{{Name: "x", Offset: 73728, Size: 513}})
	bad("empty name", []objects.TarMember{{Name: "", Offset: 512, Size: 1}})
	bad("NUL in a name", []objects.TarMember{{Name: "a\x00b", Offset: 512, Size: 1}})
	for _, c := range []struct {
		what string
		b    []byte
	}{
		{"another format", append([]byte("MTTI\x02"), b[5:]...)},
		{"cut short", b[:len(b)-1]},
		{"trailing bytes", append(append([]byte(nil), b...), 0)},
		{"empty", nil},
	} {
		if decodeTarIndex(c.b, size) != nil {
			t.Fatalf("%s: decoded, want nil", c.what)
		}
	}
}
