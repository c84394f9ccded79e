//go:build cgo

package gpu

import (
	"slices"
	"testing"
)

// LookupAll queues every hit on one stream and waits once (a blocking
// event), with the bytes right under deferred copies; a miss copies nothing.
func TestHBMLookupAllWaitsOnce(t *testing.T) {
	needDouble(t)
	t.Setenv("FAKE_CUDA_DEFER_COPIES", "1")
	_, data := testFile(t)
	const bs = 64 << 10
	st := new(Stats)
	c, err := NewHBMCache(HBMOptions{Device: 0, Budget: 4 * bs, BlockSize: bs, Stats: st})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := uint64(0); i < 3; i++ {
		if ok, err := c.Insert(BlockKey{9, i}, data[i*bs:(i+1)*bs]); !ok || err != nil {
			t.Fatalf("Insert %d: %v %v", i, ok, err)
		}
	}
	d := allocDev(t, 0, 3*bs)
	cps := []HBMCopy{
		{Key: BlockKey{9, 0}, BlockOff: 7, Dst: d.ptr, Len: bs - 7},
		{Key: BlockKey{9, 5}, Dst: d.ptr, Len: 1}, // not cached
		{Key: BlockKey{9, 1}, Dst: d.ptr + bs - 7, Len: bs},
		{Key: BlockKey{9, 2}, Dst: d.ptr + 2*bs - 7, Len: 100},
	}
	cudaHookReset()
	before := st.Snapshot()
	hit, err := c.LookupAll(cps)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, false, true, true}; !slices.Equal(hit, want) {
		t.Fatalf("hits %v, want %v", hit, want)
	}
	d.check(t, data[7:2*bs+100])
	for name, want := range map[string]int64{"calls_cuMemcpyDtoDAsync": 3, "calls_cuEventSynchronize": 1,
		"calls_cuStreamSynchronize": 0, "events_blocking_sync": 1} {
		if got := stat(t, name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	s := st.Snapshot().Sub(before)
	if s.HBMHits != 3 || s.HBMMisses != 1 || s.HBMWaits != 1 || s.HBMHitBytes != 2*bs-7+100 {
		t.Fatalf("stats %+v", s)
	}
}
