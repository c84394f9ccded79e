package diskcache

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/remote/s3test"
)

// versitygw on 127.0.0.1: s3test's harness (runtime/remote/s3test;
// MEMTIER_VERSITYGW names the binary, scripts/versitygw.sh prints it).
const vgwBucket = s3test.Bucket

// gateway is an s3test.Gateway with this package's remote Options.
type gateway struct{ *s3test.Gateway }

// startVersitygw starts versitygw (s3test.Start: skips without
// MEMTIER_VERSITYGW) and stops it at the end of the test.
func startVersitygw(tb testing.TB) *gateway {
	tb.Helper()
	return &gateway{s3test.Start(tb)}
}

// options are testOptions for g, with its credentials.
func (g *gateway) options() remote.Options {
	o := testOptions()
	o.Endpoint = g.Endpoint
	o.Credentials = &remote.Credentials{AccessKeyID: g.Access, SecretAccessKey: g.Secret}
	return o
}

// seed is g.Seed (for bench_test.go).
func (g *gateway) seed(tb testing.TB, key string, data []byte) {
	tb.Helper()
	g.Seed(tb, key, data)
}

func TestVersitygwRandomRangesAndSecondInstance(t *testing.T) {
	g := startVersitygw(t)
	want := pattern(30*testBlock+4321, 12)
	g.Put(t, "put.bin", want)
	g.Seed(t, "seeded.bin", want)
	for _, key := range []string{"put.bin", "seeded.bin"} {
		t.Run(key, func(t *testing.T) {
			name := "s3://" + vgwBucket + "/" + key
			dir := t.TempDir()
			a := newStack(t, g.options(), Options{Dir: dir})
			randomRanges(t, a, name, want, 7)
			a.c.Flush()
			blocks := uint64(len(want)+testBlock-1) / testBlock
			if st := a.c.Stats(); st.WrittenEntries != blocks || st.CorruptEntries != 0 {
				t.Fatalf("stats %+v, want %d entries", st, blocks)
			}
			b := newStack(t, g.options(), Options{Dir: dir})
			if got := b.read(t, name, 0, uint64(len(want))); !bytes.Equal(got, want) {
				t.Fatal("second instance: bytes differ")
			}
			if st := b.src.Remote().Client().Stats(); st.Requests != 1 {
				t.Fatalf("second instance sent %d GETs, want 1 (Open's)", st.Requests)
			}
			if st := b.c.Stats(); st.HitBlocks != blocks || st.MissBlocks != 0 {
				t.Fatalf("second instance stats %+v", st)
			}
			noSecretIn(t, dir, g.Secret)
		})
	}
	// An overwrite (new ETag) gives the new bytes in a fresh instance.
	neu := pattern(len(want), 99)
	g.Put(t, "put.bin", neu)
	s := newStack(t, g.options(), Options{Dir: t.TempDir()})
	s.read(t, "s3://"+vgwBucket+"/put.bin", 0, 10)
	g.Put(t, "put.bin", want)
	if got := s.read(t, "s3://"+vgwBucket+"/put.bin", 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal(fmt.Sprintf("after overwrite: old bytes (stats %+v)", s.c.Stats()))
	}
}
