package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/iopath"
)

// mapSizes are the tensors of the mapped-copy tests: odd sizes and offsets,
// one larger than a task (4 MiB: several segments), one several tasks.
var mapSizes = []int{5, 3<<20 + 7, 4096, 9<<20 + 1, 1, 70000}

// writeMapFile writes a safetensors file of U8 tensors t0..tN of mapSizes
// whose payload is pfile(seed, total); it returns the path, the payload and
// the file offset of the payload.
func writeMapFile(t *testing.T, dir string, seed int) (string, []byte, int) {
	t.Helper()
	var hdr strings.Builder
	hdr.WriteString("{")
	off := 0
	for i, n := range mapSizes {
		if i > 0 {
			hdr.WriteString(",")
		}
		fmt.Fprintf(&hdr, `"t%d":{"dtype":"U8","shape":[%d],"data_offsets":[%d,%d]}`, i, n, off, off+n)
		off += n
	}
	hdr.WriteString("}")
	data := pfile(seed, off)
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, uint64(hdr.Len()))
	buf.WriteString(hdr.String())
	start := buf.Len()
	buf.Write(data)
	path := filepath.Join(dir, "m.safetensors")
	if err := os.WriteFile(path+".tmp", buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	return path, data, start
}

// withMapCopy lowers the size floor so the small test files take the mapped
// path, and counts the mapped loads in *n; both are restored at cleanup.
func withMapCopy(t *testing.T, hook func()) *int {
	t.Helper()
	n := new(int)
	oldMin, oldHook, oldWin := mapCopyMinBytes, mapCopyHook, mapWindow
	mapCopyMinBytes = 0
	mapWindow = 1 << 20 // tensors cross windows
	mapCopyHook = func() {
		*n++
		if hook != nil {
			hook()
		}
	}
	t.Cleanup(func() { mapCopyMinBytes, mapCopyHook, mapWindow = oldMin, oldHook, oldWin })
	return n
}

// loadAllDsts is one destination per tensor (tensor skip is left nil).
func loadAllDsts(skip int) [][]byte {
	dsts := make([][]byte, len(mapSizes))
	for i, n := range mapSizes {
		if i != skip {
			dsts[i] = make([]byte, n)
		}
	}
	return dsts
}

func TestMapCopy_ExactBytesAndStats(t *testing.T) {
	path, data, _ := writeMapFile(t, t.TempDir(), 3)
	for _, mode := range []string{"mapped", "one window", "pread fallback", "planned"} {
		mapped := mode != "planned"
		t.Run(mode, func(t *testing.T) {
			n := withMapCopy(t, nil)
			switch mode {
			case "planned":
				mapCopyMinBytes = 1 << 40
			case "one window":
				mapWindow = 32 << 20
			case "pread fallback":
				mapFileFn = func(int, uint64, uint64) ([]byte, []byte, bool) { return nil, nil, false }
				t.Cleanup(func() { mapFileFn = mapFile })
			}
			c := newCtx(t, nil)
			st, err := c.OpenSafetensors(path)
			if err != nil {
				t.Fatal(err)
			}
			dsts := loadAllDsts(2)
			res := make([]int64, len(mapSizes))
			if err := st.LoadAll(dsts, res, 0); err != nil {
				t.Fatal(err)
			}
			want := 0
			if mapped {
				want = 1
			}
			if *n != want {
				t.Fatalf("mapped loads %d, want %d", *n, want)
			}
			off, total := 0, uint64(0)
			for i, sz := range mapSizes {
				wantRes := int64(sz)
				if i == 2 {
					wantRes = 0
				} else {
					if !bytes.Equal(dsts[i], data[off:off+sz]) {
						t.Fatalf("tensor %d: bytes differ from the file", i)
					}
					total += uint64(sz)
				}
				if res[i] != wantRes {
					t.Fatalf("result %d = %d, want %d", i, res[i], wantRes)
				}
				off += sz
			}
			s := c.Stats()
			if s.Requests != 5 || s.Bytes != total || s.BufferedBytes != total || s.BufferedRequests != 5 ||
				s.CacheHitBytes != 0 || s.DirectBytes != 0 {
				t.Fatalf("stats %+v, want 5 requests of %d bytes, all buffered", s, total)
			}
		})
	}
}

func TestMapCopy_TruncatedDuringLoad(t *testing.T) {
	// cut: where the hook truncates the payload, relative to tensor 3's
	// start: at a page boundary the copy faults (SIGBUS), inside a page it
	// reads zeros to the page's end and the size check after the copy
	// catches it. Either way tensors 0-2 load and 3-5 fail as a short pread
	// does.
	// With the pread fallback (no mapping) the short read says the same.
	for _, mode := range []string{"page boundary", "inside a page", "pread fallback"} {
		inPage := mode == "inside a page"
		t.Run(mode, func(t *testing.T) {
			path, data, start := writeMapFile(t, t.TempDir(), 5)
			t3 := mapSizes[0] + mapSizes[1] + mapSizes[2]
			cut := (start+t3+8192)&^4095 + 0
			if inPage {
				cut += 100
			}
			n := withMapCopy(t, func() {
				if err := os.Truncate(path, int64(cut)); err != nil {
					t.Error(err)
				}
			})
			if mode == "pread fallback" {
				mapFileFn = func(int, uint64, uint64) ([]byte, []byte, bool) { return nil, nil, false }
				t.Cleanup(func() { mapFileFn = mapFile })
			}
			c := newCtx(t, nil)
			st, err := c.OpenSafetensors(path)
			if err != nil {
				t.Fatal(err)
			}
			dsts := loadAllDsts(-1)
			res := make([]int64, len(mapSizes))
			err = st.LoadAll(dsts, res, 0)
			if *n != 1 {
				t.Fatalf("mapped loads %d", *n)
			}
			off := start
			var first error
			for i, sz := range mapSizes {
				if i < 3 {
					if res[i] != int64(sz) || !bytes.Equal(dsts[i], data[off-start:off-start+sz]) {
						t.Fatalf("tensor %d before the cut: result %d, bytes equal %v", i, res[i], bytes.Equal(dsts[i], data[off-start:off-start+sz]))
					}
				} else {
					want := errs.At(errs.EOF, "read", path, int64(off), "file shrank while reading [%d, %d)", off, off+sz)
					if res[i] != int64(errs.EOF) {
						t.Fatalf("tensor %d past the cut: result %d, want %d", i, res[i], errs.EOF)
					}
					if first == nil {
						first = want
					}
				}
				off += sz
			}
			if err == nil || err.Error() != first.Error() || code(err) != errs.EOF {
				t.Fatalf("error %v, want %v", err, first)
			}
		})
	}
}

// TestMapCopy_FaultOnTheMapping copies out of a mapping of a file truncated
// after it was mapped: the copy faults, and the fault is the segment's EOF.
func TestMapCopy_FaultOnTheMapping(t *testing.T) {
	path, data, start := writeMapFile(t, t.TempDir(), 7)
	c := newCtx(t, nil)
	obj, err := c.openTrusting(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Release()
	f := obj.(*files.File)
	base := uint64(start) &^ 4095
	end := uint64(start + len(data))
	raw, src, ok := mapFile(f.FD, base, end-base)
	if !ok {
		t.Fatal("mapFile refused")
	}
	defer unmap(raw)
	cut := (uint64(start) + 2*4096) &^ 4095
	if err := os.Truncate(path, int64(cut)); err != nil {
		t.Fatal(err)
	}
	ch := []Chunk{{Off: uint64(start), Size: 4096, Dst: make([]byte, 4096)},
		{Off: cut, Size: 8192, Dst: make([]byte, 8192)}}
	segs, _ := mapPlan(ch)
	copySegs(f, ch, segs, []int{0, 1}, src, base)
	if segs[0].fail != nil || !bytes.Equal(ch[0].Dst, data[:4096]) {
		t.Fatalf("segment before the cut: %v", segs[0].fail)
	}
	want := errs.At(errs.EOF, "read", path, int64(cut), "file shrank while reading [%d, %d)", cut, cut+8192) // the whole chunk
	if segs[1].fail == nil || segs[1].fail.Error() != want.Error() {
		t.Fatalf("segment past the cut: %v, want %v", segs[1].fail, want)
	}
}

func TestMapCopy_ReplacedDuringLoad(t *testing.T) {
	dir := t.TempDir()
	path, data, _ := writeMapFile(t, dir, 9)
	var newData []byte
	n := withMapCopy(t, func() {
		_, newData, _ = writeMapFile(t, dir, 11) // rename over the path: a new inode
	})
	c := newCtx(t, nil)
	st, err := c.OpenSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	dsts := loadAllDsts(-1)
	res := make([]int64, len(mapSizes))
	if err := st.LoadAll(dsts, res, 0); err != nil || *n != 1 {
		t.Fatalf("load during the replacement: %v (mapped loads %d)", err, *n)
	}
	if bytes.Equal(data, newData) {
		t.Fatal("the two files are equal")
	}
	off := 0
	for i, sz := range mapSizes { // the bytes of the file that was opened
		if !bytes.Equal(dsts[i], data[off:off+sz]) {
			t.Fatalf("tensor %d is not the opened file's", i)
		}
		off += sz
	}
	mapCopyHook = nil
	if err := st.LoadAll(loadAllDsts(-1), res, 0); code(err) != errs.IO || !strings.Contains(err.Error(), "changed since open") {
		t.Fatalf("load after the replacement: %v", err)
	}
}

func TestMapCopy_BadDestination(t *testing.T) {
	path, data, _ := writeMapFile(t, t.TempDir(), 13)
	withMapCopy(t, nil)
	c := newCtx(t, nil)
	st, err := c.OpenSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := unix.Mmap(-1, 0, mapSizes[3], unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(ro)
	dsts := loadAllDsts(-1)
	dsts[3] = ro
	res := make([]int64, len(mapSizes))
	err = st.LoadAll(dsts, res, 0)
	if code(err) != errs.IO || !strings.Contains(err.Error(), "bad destination address 0x") ||
		!strings.HasSuffix(err.Error(), "(memory fault while copying): bad address") || res[3] != int64(errs.IO) {
		t.Fatalf("read-only destination: %v (result %d)", err, res[3])
	}
	off := mapSizes[0] + mapSizes[1] + mapSizes[2]
	if res[4] != int64(mapSizes[4]) || !bytes.Equal(dsts[4], data[off+mapSizes[3]:off+mapSizes[3]+1]) {
		t.Fatalf("the tensor after the bad one: result %d", res[4])
	}
}

func TestMapCopy_Declines(t *testing.T) {
	path, _, start := writeMapFile(t, t.TempDir(), 15)
	size := 0
	for _, n := range mapSizes {
		size += n
	}
	chunks := func() []Chunk {
		return []Chunk{{Off: uint64(start), Size: uint64(size), Dst: make([]byte, size)}}
	}
	n := withMapCopy(t, nil)
	c := newCtx(t, nil)
	if !c.loadMapped(path, chunks(), 0) || *n != 1 {
		t.Fatal("a warm file is not mapped")
	}
	cases := map[string]func() (*Context, []Chunk, uint64){
		"below the floor": func() (*Context, []Chunk, uint64) {
			mapCopyMinBytes = uint64(size) + 1
			return c, chunks(), 0
		},
		"another version": func() (*Context, []Chunk, uint64) { return c, chunks(), 1 << 60 },
		"past the end": func() (*Context, []Chunk, uint64) {
			return c, []Chunk{{Off: uint64(start), Size: uint64(size) + 1, Dst: make([]byte, size+1)}}, 0
		},
		"short destination": func() (*Context, []Chunk, uint64) {
			return c, []Chunk{{Off: uint64(start), Size: uint64(size), Dst: make([]byte, size-1)}}, 0
		},
		"direct always": func() (*Context, []Chunk, uint64) {
			return newCtx(t, func(o *config.Options) { o.DirectMode = config.DirectAlways }), chunks(), 0
		},
		"DRAM cache holds blocks": func() (*Context, []Chunk, uint64) {
			cc := newCtx(t, nil)
			if _, err := cc.Prefetch(path, uint64(start), 4096, 0); err != nil {
				t.Fatal(err)
			}
			return cc, chunks(), 0
		},
		"a URL": func() (*Context, []Chunk, uint64) { return c, chunks(), 0 },
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			mapCopyMinBytes = 0
			cc, ch, want := mk()
			p := path
			if name == "a URL" {
				p = "s3://bucket/m.safetensors"
			}
			before := cc.Stats().Requests
			if cc.loadMapped(p, ch, want) || *n != 1 || cc.Stats().Requests != before {
				t.Fatalf("mapped (loads %d, requests %d -> %d)", *n, before, cc.Stats().Requests)
			}
		})
	}
	t.Run("cold", func(t *testing.T) {
		mapCopyMinBytes = 0
		fd, err := unix.Open(path, unix.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		_ = unix.Fsync(fd)
		if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
			t.Fatal(err)
		}
		if r, err := iopath.Resident(fd, 0, int64(start+size)); err != nil || r != 0 {
			t.Skipf("this file system keeps the file in memory after FADV_DONTNEED (%d bytes resident, %v)", r, err)
		}
		cc := newCtx(t, nil)
		if cc.loadMapped(path, chunks(), 0) || *n != 1 {
			t.Fatalf("a cold file is mapped (loads %d)", *n)
		}
	})
}
