package engine

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/policy"
)

// datasetFreshShard is a tar shard of n members of size bytes each, member
// i's bytes pfile(i*31+seed, size).
func datasetFreshShard(n, size, seed int) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := range n {
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%04d.bin", i), Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg})
		tw.Write(pfile(i*31+seed, size))
	}
	tw.Close()
	return buf.Bytes()
}

// readAllMembers reads every member of ds in one batch and checks each against
// pfile(i*31+seed, size).
func readAllMembers(t *testing.T, ds *Dataset, size, seed int) error {
	t.Helper()
	n := ds.Len()
	idx, dsts, res := make([]uint64, n), make([][]byte, n), make([]int64, n)
	for i := range idx {
		idx[i], dsts[i] = uint64(i), make([]byte, size)
	}
	if err := ds.ReadBatch(idx, dsts, res, policy.TargetCPU); err != nil {
		return err
	}
	for i := range idx {
		if res[i] != int64(size) || !bytes.Equal(dsts[i], pfile(i*31+seed, size)) {
			t.Fatalf("member %d: result %d, bytes of the version opened: %v", i, res[i], bytes.Equal(dsts[i], pfile(i*31+seed, size)))
		}
	}
	return nil
}

// TestRemoteDatasetTrustsItsOpenVersion: under strict freshness a tar
// dataset over a URL sends no revalidation per batch (remoteSamplesTrust):
// an epoch of DRAM hits sends no request at all. It is never stale for all
// that: an overwrite is never mixed in (cached samples are the opened
// version's bytes; a sample the caches lack is a GET pinned to the opened
// ETag, which fails with "changed since open"), a strict read of the URL
// that sees the new version fails the handle's next read the same way, and
// a dataset opened again reads the new bytes.
func TestRemoteDatasetTrustsItsOpenVersion(t *testing.T) {
	const n, size = 24, 40 << 10
	st := httpStore(t)
	st.put(t, "s.tar", datasetFreshShard(n, size, 0))
	url := st.url("s.tar")

	c := newCtx(t, func(o *config.Options) { o.CacheBytes, o.CacheBlockBytes = 64<<20, 1<<20 })
	if c.trust != 0 {
		t.Fatalf("context trust %v, want strict (0)", c.trust)
	}
	ds, err := c.OpenTarDataset(url)
	if err != nil {
		t.Fatal(err)
	}
	if err := readAllMembers(t, ds, size, 0); err != nil { // fills the DRAM cache
		t.Fatal(err)
	}
	c.ResetStats()
	for range 3 {
		if err := readAllMembers(t, ds, size, 0); err != nil {
			t.Fatal(err)
		}
		one := make([]byte, size)
		if err := ds.Read(5, one, policy.TargetCPU); err != nil || !bytes.Equal(one, pfile(5*31, size)) {
			t.Fatalf("read of member 5: %v", err)
		}
	}
	if s := c.Stats(); s.RemoteRequests != 0 || s.CacheHitBytes != 3*(n+1)*size {
		t.Fatalf("three epochs of hits: remote_requests %d (want 0), cache_hit_bytes %d (want %d)",
			s.RemoteRequests, s.CacheHitBytes, 3*(n+1)*size)
	}

	// Overwritten (same size, other bytes): the cached samples are still
	// the version the handle opened, never the new one.
	st.put(t, "s.tar", datasetFreshShard(n, size, 7))
	if err := readAllMembers(t, ds, size, 0); err != nil {
		t.Fatalf("cached samples after an overwrite: %v", err)
	}
	// A context without a DRAM cache fetches every sample: pinned to the
	// opened ETag, the overwrite fails loudly.
	nc := newCtx(t, func(o *config.Options) { o.CacheEnabled = false })
	st.put(t, "s.tar", datasetFreshShard(n, size, 0))
	nds, err := nc.OpenTarDataset(url)
	if err != nil {
		t.Fatal(err)
	}
	if err := readAllMembers(t, nds, size, 0); err != nil {
		t.Fatal(err)
	}
	st.put(t, "s.tar", datasetFreshShard(n, size, 7))
	if err := readAllMembers(t, nds, size, 0); code(err) != errs.IO || !strings.Contains(err.Error(), "changed since open") {
		t.Fatalf("uncached samples after an overwrite: %v, want changed since open", err)
	}

	// A strict read of the URL sees the new version: the handle's next read
	// fails, and a new handle reads the new bytes.
	got := make([]byte, 16)
	if err := c.Read(url, 0, 16, got, policy.TargetCPU, 0); err != nil {
		t.Fatal(err)
	}
	if err := readAllMembers(t, ds, size, 0); code(err) != errs.IO || !strings.Contains(err.Error(), "changed since open") {
		t.Fatalf("after a read saw the new version: %v, want changed since open", err)
	}
	ds2, err := c.OpenTarDataset(url)
	if err != nil {
		t.Fatal(err)
	}
	if err := readAllMembers(t, ds2, size, 7); err != nil {
		t.Fatalf("reopened: %v", err)
	}
}

// TestLocalDatasetStillRevalidates: a local shard's samples are checked per
// read as the context's freshness says (strict: one check per batch), and a
// rewrite fails the handle's next read.
func TestLocalDatasetStillRevalidates(t *testing.T) {
	const n, size = 8, 10 << 10
	p := t.TempDir() + "/s.tar"
	if err := os.WriteFile(p, datasetFreshShard(n, size, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCtx(t, nil)
	ds, err := c.OpenTarDataset(p)
	if err != nil {
		t.Fatal(err)
	}
	c.ResetStats()
	for range 2 {
		if err := readAllMembers(t, ds, size, 0); err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Stats(); s.Revalidations != 2 {
		t.Fatalf("two batches: revalidations %d, want 2", s.Revalidations)
	}
	if err := os.WriteFile(p, datasetFreshShard(n, size+512, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := readAllMembers(t, ds, size, 0); code(err) != errs.IO || !strings.Contains(err.Error(), "changed since open") {
		t.Fatalf("after a rewrite: %v, want changed since open", err)
	}
}
