package objects

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
)

// tarOf is a one-member archive named name holding data.
func tarOf(t *testing.T, name string, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	if err := w.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestTarCompressedShardsAreNamed(t *testing.T) {
	plain := tarOf(t, "000.jpg", bytes.Repeat([]byte{7}, 3000))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	for _, c := range []struct {
		name, format, tool string
		file               []byte
	}{
		{"gzip", "gzip", "gunzip", gz.Bytes()},
		{"gzip, 2 bytes", "gzip", "gunzip", []byte{0x1f, 0x8b}},
		{"zstd", "zstd", "unzstd", append([]byte{0x28, 0xb5, 0x2f, 0xfd}, make([]byte, 600)...)},
		{"bzip2", "bzip2", "bunzip2", append([]byte("BZh91AY&SY"), make([]byte, 600)...)},
		{"xz", "xz", "unxz", append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, make([]byte, 600)...)},
		{"lz4", "lz4", "unlz4", append([]byte{0x04, 0x22, 0x4d, 0x18}, make([]byte, 600)...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseTar(bytes.NewReader(c.file), int64(len(c.file)))
			me := tarWantErr(t, err, "compressed archive", 0)
			for _, part := range []string{"the file is " + c.format + "-compressed", "decompress it first (" + c.tool + ")"} {
				if !strings.Contains(me.Msg, part) {
					t.Fatalf("message %q lacks %q", me.Msg, part)
				}
			}
		})
	}
}

// A valid archive whose first member's name starts with a magic is listed,
// not refused: the check runs only after the first entry failed to parse.
func TestTarMagicLikeNameStillParses(t *testing.T) {
	for _, name := range []string{"\x1f\x8bimage.jpg", "BZh9.txt", "\x28\xb5\x2f\xfd.bin"} {
		file := tarOf(t, name, []byte("abc"))
		m, err := ParseTar(bytes.NewReader(file), int64(len(file)))
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if len(m) != 1 || m[0].Name != name || m[0].Size != 3 || !bytes.Equal(file[m[0].Offset:m[0].Offset+3], []byte("abc")) {
			t.Fatalf("%q: members %+v", name, m)
		}
	}
}
