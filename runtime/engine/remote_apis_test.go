package engine

// URLs through every engine API that takes a path (issue 13, part 1):
// readv (URLs beside local files), read_async, prefetch_async, load_tensor,
// load_chunks and its async form, safetensors handles, packed datasets and
// tar shards. Each test runs against two servers: a range-serving httptest
// server (http://) and versitygw, a real S3 gateway (s3://; the subtest
// skips unless MEMTIER_VERSITYGW names its binary, which
// scripts/versitygw.sh prints). Every API's bytes are compared with the
// same object read as a local file.

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/remote/s3test"
)

// objectStore is a server holding named objects: put stores one (before or
// between reads), url names it.
type objectStore struct {
	put func(tb testing.TB, name string, b []byte)
	url func(name string) string
}

// httpStore serves its objects at /NAME with an ETag of their bytes
// (net/http's ServeContent answers Range with 206 and checks If-Match and
// If-None-Match against it).
func httpStore(t *testing.T) *objectStore {
	var mu sync.Mutex
	objs := map[string][]byte{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		b, ok := objs[strings.TrimPrefix(r.URL.Path, "/")]
		mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := fnv.New64a()
		h.Write(b)
		w.Header().Set("ETag", fmt.Sprintf(`"%x"`, h.Sum64()))
		http.ServeContent(w, r, "", time.Unix(1700000000, 0), bytes.NewReader(b))
	}))
	t.Cleanup(srv.Close)
	return &objectStore{
		put: func(_ testing.TB, name string, b []byte) {
			mu.Lock()
			defer mu.Unlock()
			objs[name] = b
		},
		url: func(name string) string { return srv.URL + "/" + name },
	}
}

// versitygwStore starts versitygw (s3test.Start: skips without
// MEMTIER_VERSITYGW; bucket s3test.Bucket, a directory of its posix root:
// an object is a file) and points the remote client's environment at it
// (the client reads AWS_* when a context meets its first URL).
func versitygwStore(t *testing.T) *objectStore {
	g := s3test.Start(t)
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": g.Endpoint, "AWS_ACCESS_KEY_ID": g.Access,
		"AWS_SECRET_ACCESS_KEY": g.Secret, "AWS_REGION": g.Region, "AWS_SESSION_TOKEN": "",
		"AWS_ENDPOINT_URL_S3": "", "AWS_PROFILE": "",
	} {
		t.Setenv(k, v)
	}
	return &objectStore{put: g.Seed, url: g.URL}
}

// eachStore runs fn against the http:// server and against versitygw.
func eachStore(t *testing.T, fn func(t *testing.T, st *objectStore)) {
	t.Run("http", func(t *testing.T) { fn(t, httpStore(t)) })
	t.Run("s3_Versitygw", func(t *testing.T) { fn(t, versitygwStore(t)) })
}

// putBoth stores b as object name and as a local file; it returns the URL
// and the local path.
func putBoth(t *testing.T, st *objectStore, name string, b []byte) (string, string) {
	t.Helper()
	st.put(t, name, b)
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return st.url(name), p
}

// wantMissing checks err is the NotFound of the URL, named in the message.
func wantMissing(t *testing.T, what string, err error, url string) {
	t.Helper()
	if code(err) != errs.NotFound || !strings.Contains(err.Error(), strings.TrimPrefix(url, "s3://")) {
		t.Errorf("%s of a missing object: %v (want NotFound naming %s)", what, err, url)
	}
}

const remoteDataSize = 3<<20 + 4567

func TestRemoteAPIs_ReadV_MixedLocalAndURLs(t *testing.T) {
	eachStore(t, func(t *testing.T, st *objectStore) {
		want := pfile(0, remoteDataSize)
		url, local := putBoth(t, st, "data.bin", want)
		missing := st.url("nope.bin")
		for _, cached := range []bool{false, true} {
			c := newCtx(t, func(o *config.Options) { o.CacheEnabled = cached })
			spec := []struct {
				path      string
				off, size uint64
				result    int64
			}{
				{local, 5, 4096, 4096},
				{url, 5, 4096, 4096},
				{url, 4101, 100, 100}, // adjacent: coalesced with the one before
				{missing, 0, 10, int64(errs.NotFound)},
				{local, 1 << 20, 2 << 20, 2 << 20},
				{url, 1 << 20, 2 << 20, 2 << 20},
				{url, remoteDataSize - 10, 20, int64(errs.EOF)},
				{url, 0, 0, 0},
				{local, remoteDataSize - 7, 7, 7},
				{url, remoteDataSize - 7, 7, 7},
			}
			// Twice: with the cache on, the second call finds the URL's
			// elements in the DRAM cache (readv's inline pass).
			for pass := range 2 {
				v := make([]IOVec, len(spec))
				for i, s := range spec {
					v[i] = IOVec{Path: s.path, Off: s.off, Size: s.size, Dst: make([]byte, s.size)}
				}
				c.ResetStats()
				err := c.ReadV(v, policy.TargetCPU, 0)
				if code(err) != errs.NotFound || v[3].Err != err {
					t.Fatalf("cache %v pass %d: readv error %v, want element 3's NotFound", cached, pass, err)
				}
				wantMissing(t, "readv", v[3].Err, missing)
				for i, s := range spec {
					if v[i].Result != s.result {
						t.Errorf("cache %v pass %d: element %d result %d, want %d (%v)", cached, pass, i, v[i].Result, s.result, v[i].Err)
						continue
					}
					if s.result > 0 && !bytes.Equal(v[i].Dst, want[s.off:s.off+s.size]) {
						t.Errorf("cache %v pass %d: element %d bytes differ", cached, pass, i)
					}
				}
				if e := v[6].Err; e == nil || !strings.Contains(e.Error(), "runs past end of file") {
					t.Errorf("element past the end: %v", e)
				}
				// Every element read, local or URL, was admitted by the first
				// pass (below cache_admit_max_bytes): the second copies them
				// all from the DRAM cache.
				const all = 2*(4096+2<<20+7) + 100
				if hits := c.Stats().CacheHitBytes; cached && pass == 1 && hits != all {
					t.Errorf("second pass: cache_hit_bytes %d, want %d", hits, all)
				}
			}
		}
	})
}

func TestRemoteAPIs_ReadAsyncPrefetchAsyncLoadTensor(t *testing.T) {
	eachStore(t, func(t *testing.T, st *objectStore) {
		want := pfile(0, remoteDataSize)
		url, _ := putBoth(t, st, "data.bin", want)
		c := newCtx(t, func(o *config.Options) { o.CacheBytes, o.Freshness = 64<<20, config.FreshOpen })
		dst := make([]byte, 1<<20)
		r, err := c.ReadAsync(url, 12345, uint64(len(dst)), dst, policy.TargetCPU, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n, err, _ := r.Wait(-1); err != nil || n != uint64(len(dst)) || !bytes.Equal(dst, want[12345:12345+len(dst)]) {
			t.Fatalf("read_async: %d bytes, %v, equal %v", n, err, bytes.Equal(dst, want[12345:12345+len(dst)]))
		}
		r, err = c.PrefetchAsync(url, 0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err, _ := r.Wait(-1); err != nil {
			t.Fatalf("prefetch_async: %v", err)
		}
		c.ResetStats()
		all := make([]byte, remoteDataSize)
		if err := c.LoadTensor(url, 0, remoteDataSize, all, policy.TargetCPU); err != nil || !bytes.Equal(all, want) {
			t.Fatalf("load_tensor: %v, equal %v", err, bytes.Equal(all, want))
		}
		if s := c.Stats(); s.CacheHitBytes != remoteDataSize {
			t.Fatalf("load_tensor after prefetch_async: cache_hit_bytes %d, want %d", s.CacheHitBytes, remoteDataSize)
		}
		missing := st.url("nope.bin")
		r, err = c.ReadAsync(missing, 0, 10, dst, policy.TargetCPU, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err, _ = r.Wait(-1)
		wantMissing(t, "read_async", err, missing)
		r, err = c.PrefetchAsync(missing, 0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err, _ = r.Wait(-1)
		wantMissing(t, "prefetch_async", err, missing)
		wantMissing(t, "load_tensor", c.LoadTensor(missing, 0, 10, dst, policy.TargetCPU), missing)
	})
}

func TestRemoteAPIs_LoadChunks(t *testing.T) {
	eachStore(t, func(t *testing.T, st *objectStore) {
		want := pfile(0, remoteDataSize)
		url, _ := putBoth(t, st, "data.bin", want)
		specs := [][2]uint64{
			{0, 1000}, {1000, 3000}, {4000, 96}, // a run of adjacent chunks: one read
			{100000, 2<<20 + 17},     // larger than a task: pieces
			{50, 10},                 // overlaps the run
			{remoteDataSize - 1, 1},  // the last byte
			{remoteDataSize - 5, 10}, // past the end
			{3 << 20, 0},             // empty
		}
		results := []int64{1000, 3000, 96, 2<<20 + 17, 10, 1, int64(errs.EOF), 0}
		check := func(t *testing.T, what string, ch []Chunk) {
			t.Helper()
			for i, e := range ch {
				if e.Result != results[i] {
					t.Errorf("%s: chunk %d result %d, want %d (%v)", what, i, e.Result, results[i], e.Err)
				} else if e.Result > 0 && !bytes.Equal(e.Dst[:e.Size], want[e.Off:e.Off+e.Size]) {
					t.Errorf("%s: chunk %d bytes differ", what, i)
				} else if !bytes.Equal(e.Dst[e.Size:], bytes.Repeat([]byte{0xAA}, 8)) {
					t.Errorf("%s: chunk %d: bytes past its size written", what, i) // chunkSet's canary
				}
			}
		}
		c := newCtx(t, func(o *config.Options) { o.TaskBytes = 1 << 20 })
		for _, warm := range []bool{false, true} { // cold, then with the object in the DRAM cache
			if warm {
				if _, err := c.Prefetch(url, 0, 0, 0); err != nil {
					t.Fatal(err)
				}
			}
			ch := chunkSet(specs...)
			if err := c.LoadChunks(url, ch, policy.TargetCPU); code(err) != errs.EOF {
				t.Fatalf("load_chunks (warm %v): %v, want chunk 6's EOF", warm, err)
			}
			check(t, fmt.Sprintf("load_chunks warm %v", warm), ch)
		}
		ch := chunkSet(specs...)
		var mu sync.Mutex
		published := map[int]bool{}
		r, err := c.LoadChunksAsync(url, ch, policy.TargetCPU, func(i int) {
			mu.Lock()
			published[i] = true
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for {
			i, err := r.Next(-1)
			if code(err) == errs.EOF {
				break
			}
			if err != nil || seen[i] {
				t.Fatalf("next: %d %v (seen %v)", i, err, seen[i])
			}
			seen[i] = true
		}
		if _, err, _ := r.Wait(-1); code(err) != errs.EOF || len(seen) != len(specs) || len(published) != len(specs) {
			t.Fatalf("load_chunks_async: %v, %d chunks returned, %d published", err, len(seen), len(published))
		}
		check(t, "load_chunks_async", ch)
		missing := st.url("nope.bin")
		ch = chunkSet([2]uint64{0, 10})
		wantMissing(t, "load_chunks", c.LoadChunks(missing, ch, policy.TargetCPU), missing)
		ch = chunkSet([2]uint64{0, 10})
		r, err = c.LoadChunksAsync(missing, ch, policy.TargetCPU, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err, _ = r.Wait(-1)
		wantMissing(t, "load_chunks_async", err, missing)
	})
}

// safetensorsBytes builds a checkpoint whose header is larger than the bytes
// a remote open fetches (remote.DefaultOpenBytes, 64 KiB), so the header
// needs a ranged read of its own, with tensors of 1 MiB + 3, 4 KiB and 0
// elements.
func safetensorsBytes() []byte {
	pad := strings.Repeat("p", 100<<10)
	hdr := `{"__metadata__":{"pad":"` + pad + `"},` +
		`"w":{"dtype":"U8","shape":[1048579],"data_offsets":[0,1048579]},` +
		`"b":{"dtype":"F32","shape":[1024],"data_offsets":[1048579,1052675]},` +
		`"e":{"dtype":"F32","shape":[0],"data_offsets":[1052675,1052675]}}`
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, uint64(len(hdr)))
	buf.WriteString(hdr)
	buf.Write(pfile(0, 1052675))
	return buf.Bytes()
}

func TestRemoteAPIs_Safetensors(t *testing.T) {
	eachStore(t, func(t *testing.T, st *objectStore) {
		file := safetensorsBytes()
		url, local := putBoth(t, st, "m.safetensors", file)
		c := newCtx(t, nil)
		ref, err := c.OpenSafetensors(local)
		if err != nil {
			t.Fatal(err)
		}
		h, err := c.OpenSafetensors(url)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(h.Tensors) != fmt.Sprint(ref.Tensors) || h.Metadata["pad"] != ref.Metadata["pad"] || len(h.Tensors) != 3 {
			t.Fatalf("header differs from the local file's: %v against %v", h.Tensors, ref.Tensors)
		}
		for i, tn := range h.Tensors { // Begin and End are file offsets
			dst := make([]byte, tn.End-tn.Begin)
			if err := h.Load(i, dst, policy.TargetCPU); err != nil || !bytes.Equal(dst, file[tn.Begin:tn.End]) {
				t.Fatalf("load %s: %v", tn.Name, err)
			}
		}
		// One buffer laid out like the data section: one merged chunk.
		all := make([]byte, 1052675)
		dsts := make([][]byte, len(h.Tensors))
		for i, tn := range h.Tensors {
			dsts[i] = all[tn.Begin-h.Tensors[0].Begin : tn.End-h.Tensors[0].Begin]
		}
		res := make([]int64, len(h.Tensors))
		if err := h.LoadAll(dsts, res, policy.TargetCPU); err != nil || !bytes.Equal(all, file[h.Tensors[0].Begin:]) {
			t.Fatalf("load_all: %v %v", res, err)
		}
		if fmt.Sprint(res) != "[1048579 4096 0]" {
			t.Fatalf("load_all results %v", res)
		}
		// Overwritten: the handle's offsets belong to the old version.
		st.put(t, "m.safetensors", append([]byte(nil), file[:len(file)-1]...))
		if err := h.Load(1, dsts[1], policy.TargetCPU); code(err) != errs.IO || !strings.Contains(err.Error(), "changed since open") {
			t.Fatalf("load after an overwrite: %v", err)
		}
		st.put(t, "bad.safetensors", []byte("short"))
		if _, err := c.OpenSafetensors(st.url("bad.safetensors")); code(err) != errs.Format ||
			!strings.Contains(err.Error(), strings.TrimPrefix(st.url("bad.safetensors"), "s3://")) {
			t.Fatalf("open of a 5-byte object: %v", err)
		}
		missing := st.url("nope.safetensors")
		_, err = c.OpenSafetensors(missing)
		wantMissing(t, "safetensors_open", err, missing)
	})
}

// tarBytes builds a shard of 40 members of 50 KiB, one of 1.5 MiB and a
// last small one: more than one metadata window (metaWindow) of headers.
func tarBytes() []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, body []byte) {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write(body)
	}
	for i := range 40 {
		add(fmt.Sprintf("%04d.bin", i), pfile(i*1000, 50<<10))
	}
	add("big.bin", pfile(7, 3<<19))
	add("last.txt", []byte("the end"))
	tw.Close()
	return buf.Bytes()
}

func TestRemoteAPIs_Datasets(t *testing.T) {
	eachStore(t, func(t *testing.T, st *objectStore) {
		want := pfile(0, remoteDataSize)
		dataURL, dataLocal := putBoth(t, st, "d.bin", want)
		index := []byte("0 10\n10 20\n500 0\n900 100\n100000 2097152\n")
		indexURL, indexLocal := putBoth(t, st, "d.idx", index)
		c := newCtx(t, nil)
		for _, paths := range [][2]string{{dataURL, indexURL}, {dataURL, indexLocal}, {dataLocal, indexURL}} {
			ds, err := c.OpenDataset(paths[0], paths[1])
			if err != nil {
				t.Fatalf("open %v: %v", paths, err)
			}
			if ds.Len() != 5 {
				t.Fatalf("%v: %d samples", paths, ds.Len())
			}
			idx := []uint64{4, 1, 0, 3, 2, 9}
			dsts := make([][]byte, len(idx))
			for k, i := range idx {
				if _, size, _, ok := ds.Sample(i); ok {
					dsts[k] = make([]byte, size)
				}
			}
			res := make([]int64, len(idx))
			err = ds.ReadBatch(idx, dsts, res, policy.TargetCPU)
			if code(err) != errs.InvalidArg || fmt.Sprint(res) != fmt.Sprintf("[2097152 20 10 100 0 %d]", errs.InvalidArg) {
				t.Fatalf("%v: read_batch %v %v", paths, res, err)
			}
			for k, i := range idx[:5] {
				off, size, _, _ := ds.Sample(i)
				if !bytes.Equal(dsts[k], want[off:off+size]) {
					t.Fatalf("%v: sample %d bytes differ", paths, i)
				}
			}
			one := make([]byte, 100)
			if err := ds.Read(3, one, policy.TargetCPU); err != nil || !bytes.Equal(one, want[900:1000]) {
				t.Fatalf("%v: read: %v", paths, err)
			}
		}
		st.put(t, "bad.idx", []byte("0 10\n990 20 x\n"))
		if _, err := c.OpenDataset(dataURL, st.url("bad.idx")); code(err) != errs.Format ||
			!strings.Contains(err.Error(), strings.TrimPrefix(st.url("bad.idx"), "s3://")) {
			t.Fatalf("a bad index object: %v", err)
		}
		missing := st.url("nope.idx")
		_, err := c.OpenDataset(dataURL, missing)
		wantMissing(t, "dataset_open (index)", err, missing)
		_, err = c.OpenDataset(st.url("nope.bin"), indexURL)
		wantMissing(t, "dataset_open (data)", err, st.url("nope.bin"))

		shard := tarBytes()
		shardURL, shardLocal := putBoth(t, st, "s.tar", shard)
		ref, err := c.OpenTarDataset(shardLocal)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := c.OpenTarDataset(shardURL)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ts.Members) != fmt.Sprint(ref.Members) || ts.Len() != 42 {
			t.Fatalf("members differ from the local shard's (%d against %d)", ts.Len(), ref.Len())
		}
		idx := make([]uint64, ts.Len())
		dsts := make([][]byte, ts.Len())
		for i := range idx {
			idx[i] = uint64(i)
			_, size, _, _ := ts.Sample(uint64(i))
			dsts[i] = make([]byte, size)
		}
		res := make([]int64, len(idx))
		if err := ts.ReadBatch(idx, dsts, res, policy.TargetCPU); err != nil {
			t.Fatalf("tar read_batch: %v %v", res, err)
		}
		for i := range idx {
			off, size, _, _ := ts.Sample(uint64(i))
			if res[i] != int64(size) || !bytes.Equal(dsts[i], shard[off:off+size]) {
				t.Fatalf("member %d: result %d, bytes differ", i, res[i])
			}
		}
		last := make([]byte, 7)
		if err := ts.Read(41, last, policy.TargetCPU); err != nil || string(last) != "the end" {
			t.Fatalf("tar read: %q %v", last, err)
		}
		missing = st.url("nope.tar")
		_, err = c.OpenTarDataset(missing)
		wantMissing(t, "dataset_open_tar", err, missing)
	})
}

// TestRemoteAPIs_DatasetSamplesFillTheDRAMCache: below a URL there is no
// page cache, so a dataset's samples of a remote object are admitted and
// the next epoch's reads are DRAM-cache hits; a local dataset's are not
// (its page cache is that tier), as before.
func TestRemoteAPIs_DatasetSamplesFillTheDRAMCache(t *testing.T) {
	st := httpStore(t)
	want := pfile(0, 1<<20)
	dataURL, dataLocal := putBoth(t, st, "s.bin", want)
	_, indexLocal := putBoth(t, st, "s.idx", []byte("4096 8192\n65536 1000\n"))
	for _, tc := range []struct {
		data    string
		hitWant uint64
	}{{dataURL, 8192 + 1000}, {dataLocal, 0}} {
		c := newCtx(t, nil)
		ds, err := c.OpenDataset(tc.data, indexLocal)
		if err != nil {
			t.Fatal(err)
		}
		for epoch := 0; epoch < 2; epoch++ {
			for i, span := range [][2]uint64{{4096, 8192}, {65536, 1000}} {
				dst := make([]byte, span[1])
				if err := ds.Read(uint64(i), dst, policy.TargetCPU); err != nil || !bytes.Equal(dst, want[span[0]:span[0]+span[1]]) {
					t.Fatalf("%s epoch %d sample %d: %v", tc.data, epoch, i, err)
				}
			}
			if epoch == 0 {
				c.ResetStats()
			}
		}
		if got := c.Stats().CacheHitBytes; got != tc.hitWant {
			t.Fatalf("%s: second epoch cache_hit_bytes %d, want %d", tc.data, got, tc.hitWant)
		}
	}
}

// TestRemoteAPIs_TarSamplesReadInWindows: the samples of a tar shard over
// a URL are read in windows of the remote part size (windows.go), so an
// epoch in batches costs one GET per 5 MiB window, not a GET per sample, and
// no revalidation (the handle trusts the version checked at open,
// remoteSamplesTrust; strict freshness sent one per batch); the second epoch
// is all DRAM hits and sends no request.
func TestRemoteAPIs_TarSamplesReadInWindows(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	const members, size = 120, 100 << 10
	for i := range members {
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%04d.bin", i), Mode: 0o644, Size: size, Typeflag: tar.TypeReg})
		tw.Write(pfile(i*77, size))
	}
	tw.Close()
	shard := buf.Bytes() // 12,339,200 bytes: three 5 MiB windows
	url, gets := rangeServer(t, shard)
	old := getenv
	getenv = func(k string) string {
		if k == "MEMTIER_REMOTE_PART_BYTES" {
			return "5M"
		}
		return ""
	}
	t.Cleanup(func() { getenv = old })
	c := newCtx(t, func(o *config.Options) { o.CacheBytes, o.CacheBlockBytes = 64<<20, 1<<20 })
	ds, err := c.OpenTarDataset(url)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Len() != members {
		t.Fatalf("%d members, want %d", ds.Len(), members)
	}
	const batch = 16
	epoch := func() int64 {
		g := gets.Load()
		c.ResetStats()
		for lo := 0; lo < members; lo += batch {
			n := min(batch, members-lo)
			idx, dsts, res := make([]uint64, n), make([][]byte, n), make([]int64, n)
			for k := range idx {
				idx[k], dsts[k] = uint64(lo+k), make([]byte, size)
			}
			if err := ds.ReadBatch(idx, dsts, res, policy.TargetCPU); err != nil {
				t.Fatal(err)
			}
			for k := range idx {
				if res[k] != size || !bytes.Equal(dsts[k], pfile((lo+k)*77, size)) {
					t.Fatalf("sample %d: result %d, bytes equal %v", lo+k, res[k], bytes.Equal(dsts[k], pfile((lo+k)*77, size)))
				}
			}
		}
		return gets.Load() - g
	}
	if n := epoch(); n != 3 {
		t.Fatalf("first epoch: %d GETs, want 3 (the windows, no revalidation)", n)
	}
	if s := c.Stats(); s.CacheInsertedBytes != uint64(len(shard)) {
		t.Fatalf("first epoch inserted %d bytes, want the shard's %d", s.CacheInsertedBytes, len(shard))
	}
	if n := epoch(); n != 0 {
		t.Fatalf("second epoch: %d GETs, want 0", n)
	}
	if s := c.Stats(); s.RemoteRequests != 0 || s.Revalidations != 0 {
		t.Fatalf("second epoch: remote_requests %d, revalidations %d; want 0, 0", s.RemoteRequests, s.Revalidations)
	}
	if s := c.Stats(); s.CacheHitBytes != members*size || s.CacheInsertedBytes != 0 {
		t.Fatalf("second epoch: hit bytes %d, inserted %d; want %d, 0", s.CacheHitBytes, s.CacheInsertedBytes, members*size)
	}
}
