package mem

import (
	"sync"
	"testing"
)

func TestArenaRoundsAndAligns(t *testing.T) {
	a := NewArena(5000, 3)
	defer a.Close()
	if a.BufSize() != 8192 {
		t.Fatalf("BufSize = %d, want 8192", a.BufSize())
	}
	for i := 0; i < 3; i++ {
		b := a.Get()
		if b == nil {
			t.Fatalf("Get %d returned nil", i)
		}
		if len(b) != 8192 || cap(b) != 8192 {
			t.Fatalf("len/cap = %d/%d, want 8192/8192", len(b), cap(b))
		}
		if addr(b)%4096 != 0 {
			t.Fatalf("buffer %d at %#x is not 4096-aligned", i, addr(b))
		}
		b[0], b[len(b)-1] = 1, 2 // must be writable end to end
	}
}

func TestArenaBoundAndReuse(t *testing.T) {
	a := NewArena(4096, 4)
	defer a.Close()
	var got [][]byte
	seen := map[uintptr]bool{}
	for i := 0; i < 4; i++ {
		b := a.Get()
		if b == nil {
			t.Fatalf("Get %d returned nil before the bound", i)
		}
		if seen[addr(b)] {
			t.Fatalf("Get %d returned a buffer already handed out", i)
		}
		seen[addr(b)] = true
		got = append(got, b)
	}
	if b := a.Get(); b != nil {
		t.Fatal("Get beyond maxBufs returned a buffer")
	}
	if a.InUse() != 4 {
		t.Fatalf("InUse = %d, want 4", a.InUse())
	}
	got[2][7] = 0x5A
	a.Put(got[2][:10]) // a prefix reslice is still the same buffer
	b := a.Get()
	if b == nil || addr(b) != addr(got[2]) {
		t.Fatal("Put buffer was not reused")
	}
	if len(b) != 4096 || b[7] != 0x5A {
		t.Fatal("reused buffer lost its length or contents")
	}
	// Only 4 buffers fit in the bound, so the slab must be sized to it, not 2 MiB.
	if len(a.slabs) != 1 || len(a.slabs[0]) != 4*4096 {
		t.Fatalf("slabs = %d of %d bytes, want 1 of %d", len(a.slabs), len(a.slabs[0]), 4*4096)
	}
}

func TestArenaIgnoresBadPuts(t *testing.T) {
	a := NewArena(4096, 2)
	defer a.Close()
	other := NewArena(4096, 2)
	defer other.Close()

	b := a.Get()
	a.Put(b)
	a.Put(b)           // double Put
	a.Put(other.Get()) // foreign buffer
	a.Put(nil)
	a.Put(make([]byte, 4096)) // Go heap memory
	x, y := a.Get(), a.Get()
	if x == nil || y == nil || addr(x) == addr(y) {
		t.Fatal("a double or foreign Put handed one buffer out twice")
	}
	if a.Get() != nil {
		t.Fatal("a foreign Put grew the arena beyond its bound")
	}
}

func TestArenaSlabSizing(t *testing.T) {
	a := NewArena(4096, 1000)
	defer a.Close()
	a.Put(a.Get())
	if len(a.slabs) != 1 || len(a.slabs[0]) != 2<<20 {
		t.Fatalf("4 KiB buffers: slab of %d bytes, want 2 MiB", len(a.slabs[0]))
	}
	big := NewArena(3<<20, 2)
	defer big.Close()
	big.Put(big.Get())
	if len(big.slabs[0]) != 3<<20 {
		t.Fatalf("3 MiB buffers: slab of %d bytes, want one buffer", len(big.slabs[0]))
	}
}

func TestArenaClose(t *testing.T) {
	a := NewArena(4096, 2)
	b := a.Get()
	a.Close()
	a.Close()
	a.Put(b)
	if a.Get() != nil {
		t.Fatal("Get after Close returned a buffer")
	}
}

func TestArenaConcurrent(t *testing.T) {
	const bufs = 8
	a := NewArena(4096, bufs)
	defer a.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	owner := map[uintptr]int{}
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				b := a.Get()
				if b == nil {
					continue // all in use right now; the bound is doing its job
				}
				mu.Lock()
				if o, ok := owner[addr(b)]; ok {
					mu.Unlock()
					t.Errorf("buffer %#x handed to %d while %d holds it", addr(b), g, o)
					return
				}
				owner[addr(b)] = g
				mu.Unlock()
				b[0] = byte(g)
				mu.Lock()
				delete(owner, addr(b))
				mu.Unlock()
				a.Put(b)
			}
		}(g)
	}
	wg.Wait()
	if a.InUse() != 0 {
		t.Fatalf("InUse = %d after every buffer was returned", a.InUse())
	}
}
