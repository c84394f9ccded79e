package engine

import (
	"archive/tar"
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/diskcache"
	"github.com/memtier/memtier/runtime/policy"
)

// tarGET is one GET a tarServer answered: its Range header and whether it
// carried If-Match.
type tarGET struct {
	rng     string
	ifMatch bool
}

// tarServer serves data at /shard.tar and records each GET; gate, when
// set, runs before a GET that carries If-Match (a block GET, not Open's).
func tarServer(t *testing.T, data []byte, gate func()) (url string, gets func() []tarGET) {
	t.Helper()
	var mu sync.Mutex
	var log []tarGET
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := tarGET{rng: r.Header.Get("Range"), ifMatch: r.Header.Get("If-Match") != ""}
		mu.Lock()
		log = append(log, g)
		mu.Unlock()
		if g.ifMatch && gate != nil {
			gate()
		}
		w.Header().Set("ETag", `"t1"`)
		http.ServeContent(w, r, "shard.tar", time.Unix(1700000000, 0), bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/shard.tar", func() []tarGET {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(log)
	}
}

// tarOf returns a tar archive of n members of size bytes each (pfile data).
func tarOf(t *testing.T, n, size int) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := range n {
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%04d.bin", i), Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(pfile(i*31, size))
	}
	tw.Close()
	return buf.Bytes()
}

// blockRanges returns the Range headers of the GETs of disk blocks idx (4
// MiB) of an object of size bytes: block 0's starts after the 64 KiB Open
// fetched and its Object keeps.
func blockRanges(size int, idx ...int) []string {
	var r []string
	for _, b := range idx {
		r = append(r, fmt.Sprintf("bytes=%d-%d", max(b<<22, 64<<10), min((b+1)<<22, size)-1))
	}
	return r
}

// TestTarOpenFetchesBlocksInParallel: indexing a shard of small members
// below a disk cache fetches its disk blocks as one window (tarfetch.go),
// their GETs in flight together (the server holds each block GET until all
// three arrived: one after another, the first would wait forever), pinned
// to the ETag, each block once; a second context reads the member list
// from the disk tier with no GET but Open's.
func TestTarOpenFetchesBlocksInParallel(t *testing.T) {
	shard := tarOf(t, 120, 100<<10) // 12,350,464 bytes: disk blocks of 4, 4 and 3.78 MiB
	var arrived sync.WaitGroup
	arrived.Add(3)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	var n atomic.Int32
	url, gets := tarServer(t, shard, func() {
		if n.Add(1) <= 3 {
			arrived.Done()
		}
		select {
		case <-all:
		case <-time.After(20 * time.Second):
			t.Error("a block GET waited 20 s for the other two: the blocks were fetched one after another")
		}
	})
	withDiskEnv(t, map[string]string{diskcache.EnvDir: t.TempDir() + "/disk", diskcache.EnvBytes: "64M"})
	a := newCtx(t, nil)
	ds, err := a.OpenTarDataset(url)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Members) != 120 || ds.Members[119].Offset != 119*(100<<10+512)+512 {
		t.Fatalf("%d members, last at %d", len(ds.Members), ds.Members[len(ds.Members)-1].Offset)
	}
	g := gets()
	want := append([]string{"bytes=0-65535"}, blockRanges(len(shard), 0, 1, 2)...)
	var got []string
	for i, x := range g {
		got = append(got, x.rng)
		if x.ifMatch != (i > 0) {
			t.Errorf("GET %d (%s): If-Match %v, want %v (Open's alone is not pinned)", i, x.rng, x.ifMatch, i > 0)
		}
	}
	slices.Sort(got[1:]) // the block GETs in any order
	slices.Sort(want[1:])
	if !slices.Equal(got, want) {
		t.Fatalf("GETs %q, want %q (Open's, then each disk block once)", got, want)
	}
	if s := a.Stats(); s.RemoteRequests != 4 || s.RemoteBytes != uint64(len(shard)) {
		t.Fatalf("remote requests %d, bytes %d; want 4, %d (each byte once)", s.RemoteRequests, s.RemoteBytes, len(shard))
	}
	if st := diskStatsOf(t, a); st.MissBlocks != 3 || st.MissBytes != uint64(len(shard)) || st.QueueDrops != 0 {
		t.Fatalf("disk stats %+v: want 3 blocks, %d bytes fetched, none dropped", st, len(shard))
	}
	a.src.(*sources).closeDisk()

	b := newCtx(t, nil)
	n0 := len(gets())
	ds2, err := b.OpenTarDataset(url)
	if err != nil {
		t.Fatal(err)
	}
	if g := gets()[n0:]; len(g) != 1 || g[0].rng != "bytes=0-65535" || !slices.Equal(ds2.Members, ds.Members) {
		t.Fatalf("second context: GETs %v, %d members; want Open's alone and the same list", g, len(ds2.Members))
	}
}

// TestTarOpenSkipsLargeMembers: in a shard of members larger than a disk
// block the window shrinks to the block under each header once the parser
// skips data (tarfetch.go), so indexing fetches the first window (4
// blocks) and then one block per header, not the members' data.
func TestTarOpenSkipsLargeMembers(t *testing.T) {
	const size = 20 << 20
	shard := tarOf(t, 3, size) // headers at 0, 20 MiB + 512, 40 MiB + 1024; the end at 60 MiB + 1536
	url, gets := tarServer(t, shard, nil)
	withDiskEnv(t, map[string]string{diskcache.EnvDir: t.TempDir() + "/disk", diskcache.EnvBytes: "256M"})
	c := newCtx(t, nil)
	ds, err := c.OpenTarDataset(url)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Members) != 3 || ds.Members[2].Offset != 2*(size+512)+512 || ds.Members[2].Size != size {
		t.Fatalf("members %+v", ds.Members)
	}
	var got []string
	for _, x := range gets()[1:] {
		got = append(got, x.rng)
	}
	slices.Sort(got)
	want := blockRanges(len(shard), 0, 1, 10, 15, 2, 3, 5) // sorted as strings
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("block GETs %q, want %q (the first window, then the block of each later header)", got, want)
	}
	// The member list is all a reader needs: every sample reads back.
	dst := make([]byte, size)
	for i := range 3 {
		if err := ds.Read(uint64(i), dst, policy.TargetCPU); err != nil || !bytes.Equal(dst, pfile(i*31, size)) {
			t.Fatalf("sample %d: %v", i, err)
		}
	}
}
