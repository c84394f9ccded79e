package engine

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtier/memtier/runtime/errs"
)

// writeSafetensors writes a file whose tensors a (U8 [3]) and b (F32 [2]) hold
// data[0:3] and data[3:11].
func writeSafetensors(t *testing.T, path string, data []byte, meta string) {
	t.Helper()
	hdr := `{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},` +
		`"b":{"dtype":"F32","shape":[2],"data_offsets":[3,11]}` + meta + `}`
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, uint64(len(hdr)))
	buf.WriteString(hdr)
	buf.Write(data[:11])
	if err := os.WriteFile(path+".tmp", buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil { // atomic replacement, a new inode
		t.Fatal(err)
	}
}

func TestSafetensors_LoadAndChangedSinceOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	data := []byte("ABCdefghijk")
	writeSafetensors(t, path, data, "")
	c := newCtx(t, nil)
	st, err := c.OpenSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Tensors) != 2 || st.Index("b") != 1 {
		t.Fatalf("tensors %+v", st.Tensors)
	}
	dst := make([]byte, 8)
	if err := st.Load(1, dst, 0); err != nil || string(dst) != "defghijk" {
		t.Fatalf("load b: %q %v", dst, err)
	}
	if err := st.Load(1, make([]byte, 7), 0); code(err) != errs.InvalidArg {
		t.Fatalf("short dst: %v", err)
	}
	res := make([]int64, 2)
	a := make([]byte, 3)
	if err := st.LoadAll([][]byte{a, nil}, res, 0); err != nil || string(a) != "ABC" || res[0] != 3 || res[1] != 0 {
		t.Fatalf("load_all: %q %v %v", a, res, err)
	}
	writeSafetensors(t, path, []byte("XYZXYZXYZXYZ"), `,"__metadata__":{"k":"v"}`)
	if err := st.Load(0, a, 0); code(err) != errs.IO || !strings.Contains(err.Error(), "changed since open") {
		t.Fatalf("load after replacement: %v", err)
	}
	if string(a) != "ABC" {
		t.Fatal("bytes of the new file written")
	}
	if err := os.WriteFile(path, []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenSafetensors(path); code(err) != errs.Format || !strings.Contains(err.Error(), path) {
		t.Fatalf("open of a 5-byte file: %v", err)
	}
}

func TestDataset_PackedAndTar(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "d.bin")
	if err := os.WriteFile(data, pfile(0, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(dir, "d.idx")
	os.WriteFile(index, []byte("0 10\n10 20\n500 0\n900 100\n"), 0o644)
	c := newCtx(t, nil)
	ds, err := c.OpenDataset(data, index)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Len() != 4 {
		t.Fatalf("len %d", ds.Len())
	}
	dsts := [][]byte{make([]byte, 20), make([]byte, 10), make([]byte, 100), nil}
	res := make([]int64, 4)
	err = ds.ReadBatch([]uint64{1, 0, 3, 9}, dsts, res, 0)
	if code(err) != errs.InvalidArg || res[0] != 20 || res[1] != 10 || res[2] != 100 || res[3] != int64(errs.InvalidArg) {
		t.Fatalf("batch: %v %v", res, err)
	}
	if !bytes.Equal(dsts[0], pfile(10, 20)) || !bytes.Equal(dsts[2], pfile(900, 100)) {
		t.Fatal("batch bytes differ")
	}
	os.WriteFile(index, []byte("0 10\n990 20\n"), 0o644)
	if _, err := c.OpenDataset(data, index); code(err) != errs.Format {
		t.Fatalf("record past the end: %v", err)
	}

	shard := filepath.Join(dir, "s.tar")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	long := strings.Repeat("n", 150) + ".txt"
	for _, m := range []struct{ name, body string }{{"a.txt", "hello"}, {long, "world!"}} {
		tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(m.body))
	}
	tw.Close()
	os.WriteFile(shard, buf.Bytes(), 0o644)
	ts, err := c.OpenTarDataset(shard)
	if err != nil {
		t.Fatal(err)
	}
	if ts.Len() != 2 {
		t.Fatalf("members %d", ts.Len())
	}
	_, size, name, ok := ts.Sample(1)
	if !ok || name != long || size != 6 {
		t.Fatalf("sample 1: %q %d", name, size)
	}
	dst := make([]byte, 6)
	if err := ts.Read(1, dst, 0); err != nil || string(dst) != "world!" {
		t.Fatalf("read: %q %v", dst, err)
	}
	if err := ts.Read(1, make([]byte, 5), 0); code(err) != errs.InvalidArg {
		t.Fatalf("short dst: %v", err)
	}
	again, err := c.OpenTarDataset(shard)
	if err != nil || &again.Members[0] != &ts.Members[0] || c.tars.len() != 1 {
		t.Fatalf("reopen did not reuse the member list: %v", err)
	}
}
