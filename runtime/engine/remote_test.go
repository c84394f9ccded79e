package engine

// URLs through the engine: read, prefetch and explain of http:// objects
// served by a plain range-serving server (net/http's ServeContent answers
// Range with 206 and Content-Range, and If-Match against the ETag); the S3
// side of runtime/remote is tested against versitygw in that package, and
// every other API that takes a path in remote_apis_test.go.

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memtier/memtier/gpu"
	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/policy"
)

// rangeServer serves data at /data.bin with a fixed ETag and counts GETs.
func rangeServer(t *testing.T, data []byte) (url string, gets *atomic.Int64) {
	t.Helper()
	gets = new(atomic.Int64)
	mod := time.Unix(1700000000, 0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/data.bin" {
			http.NotFound(w, r)
			return
		}
		gets.Add(1)
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "data.bin", mod, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/data.bin", gets
}

func TestRemoteReadThroughTheCache(t *testing.T) {
	const n = 3<<20 + 123
	want := pfile(0, n)
	url, gets := rangeServer(t, want)
	c := newCtx(t, func(o *config.Options) { o.CacheBytes, o.CacheBlockBytes = 64<<20, 1<<20 })
	got := make([]byte, n)
	if err := c.Read(url, 0, n, got, policy.TargetCPU, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes of the whole object differ")
	}
	// A range read again: served by the DRAM cache. Strict freshness
	// revalidates the object first (one conditional GET, answered 304).
	before := gets.Load()
	c.ResetStats()
	part := make([]byte, 100000)
	if err := c.Read(url, 2<<20+7, uint64(len(part)), part, policy.TargetCPU, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(part, want[2<<20+7:2<<20+7+len(part)]) {
		t.Fatal("bytes of the cached range differ")
	}
	if s := c.Stats(); s.CacheHitBytes != uint64(len(part)) || s.BufferedBytes+s.DirectBytes != 0 {
		t.Fatalf("second read: cache_hit_bytes %d, buffered %d, direct %d", s.CacheHitBytes, s.BufferedBytes, s.DirectBytes)
	}
	if after := gets.Load(); after != before+1 {
		t.Fatalf("a cached range under strict freshness cost %d GETs, want 1 (the revalidation)", after-before)
	}
	// READ_IMMUTABLE trusts the object as last checked: no GET at all.
	before = gets.Load()
	if err := c.Read(url, 7, uint64(len(part)), part, policy.TargetCPU, policy.ReadImmutable); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(part, want[7:7+len(part)]) || gets.Load() != before {
		t.Fatalf("immutable cached read: bytes equal %v, %d GETs", bytes.Equal(part, want[7:7+len(part)]), gets.Load()-before)
	}
}

func TestRemotePrefetchThenHits(t *testing.T) {
	const n = 2<<20 + 5
	want := pfile(0, n)
	url, gets := rangeServer(t, want)
	c := newCtx(t, func(o *config.Options) { o.CacheBytes, o.CacheBlockBytes = 64<<20, 1<<20 })
	fetched, err := c.Prefetch(url, 0, 0, 0)
	if err != nil || fetched != n {
		t.Fatalf("prefetch: %d bytes, %v; want %d", fetched, err, n)
	}
	before := gets.Load()
	c.ResetStats()
	got := make([]byte, n)
	if err := c.Read(url, 0, n, got, policy.TargetCPU, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes after prefetch differ")
	}
	if s := c.Stats(); s.CacheHitBytes != n || gets.Load() != before+1 {
		t.Fatalf("read after prefetch: cache_hit_bytes %d, %d new GETs (want 1: the revalidation)", s.CacheHitBytes, gets.Load()-before)
	}
	ex, err := c.Explain(url, 0, n, true, policy.TargetCPU, 0)
	if err != nil || ex.Path != policy.PathCache || ex.CachedBytes != n {
		t.Fatalf("explain: %+v %v", ex, err)
	}
}

func TestRemoteErrors(t *testing.T) {
	const n = 10000
	url, _ := rangeServer(t, pfile(0, n))
	c := newCtx(t, nil)
	dst := make([]byte, 2*n)
	err := c.Read(url, 0, 2*n, dst, policy.TargetCPU, 0)
	if code(err) != errs.EOF || !strings.Contains(err.Error(), "runs past end of file (size 10000)") {
		t.Fatalf("read past the end: %v", err)
	}
	missing := strings.TrimSuffix(url, "data.bin") + "nope.bin"
	if err := c.Read(missing, 0, 10, dst, policy.TargetCPU, 0); code(err) != errs.NotFound {
		t.Fatalf("missing object: %v", err)
	}
	// With a usable GPU backend (the double in gpu_double_go) the destination
	// must be device memory, or its check answers first (INVALID_ARG).
	cudaDst := dst
	if gpu.Available() {
		cudaDst = devSlice(devMem(t, 16), 10)
	}
	if err := c.Read(url, 0, 10, cudaDst, policy.TargetCUDA, 0); code(err) != errs.Unsupported {
		t.Fatalf("CUDA read of a URL: %v", err)
	}
	// The CUDA target reads local files only so far, in chunk loads too
	// (without a GPU backend the GPU's reason comes first).
	if err := c.LoadChunks(url, []Chunk{{Off: 0, Size: 10, Dst: cudaDst}}, policy.TargetCUDA); code(err) != errs.Unsupported {
		t.Fatalf("CUDA chunk load of a URL: %v", err)
	}
}

// A cached read of a remote object costs one GET for the whole run, not one
// per cache block (1 MiB read, 64 KiB blocks: 16 blocks).
func TestRemoteFillIsOneReadPerRun(t *testing.T) {
	const n = 4 << 20
	want := pfile(0, n)
	url, gets := rangeServer(t, want)
	c := newCtx(t, func(o *config.Options) {
		o.CacheBytes, o.CacheBlockBytes = 64<<20, 64<<10
		o.Freshness = config.FreshOpen
	})
	head := make([]byte, 1)
	if err := c.Read(url, 0, 1, head, policy.TargetCPU, 0); err != nil { // Open: the first GET
		t.Fatal(err)
	}
	before := gets.Load()
	got := make([]byte, 1<<20)
	const off = 2<<20 + 100
	if err := c.Read(url, off, 1<<20, got, policy.TargetCPU, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want[off:off+1<<20]) {
		t.Fatal("bytes differ")
	}
	if d := gets.Load() - before; d != 1 {
		t.Fatalf("a 1 MiB read over 17 cache blocks cost %d GETs, want 1", d)
	}
	// The run is now in the cache: read again, no GET.
	c.ResetStats()
	if err := c.Read(url, off, 1<<20, got, policy.TargetCPU, 0); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.CacheHitBytes != 1<<20 || gets.Load()-before != 1 || !bytes.Equal(got, want[off:off+1<<20]) {
		t.Fatalf("second read: cache_hit_bytes %d, GETs %d", s.CacheHitBytes, gets.Load()-before)
	}
}

// freshness "open" trusts the version it holds until drop_cache: then the
// next read asks the server again and sees the new version.
func TestRemoteDropCacheRefreshes(t *testing.T) {
	var version atomic.Int64
	version.Store(1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := version.Load()
		w.Header().Set("ETag", fmt.Sprintf(`"v%d"`, v))
		http.ServeContent(w, r, "x", time.Unix(1700000000+v, 0), bytes.NewReader(bytes.Repeat([]byte{byte('0' + v)}, 200000)))
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/x"
	c := newCtx(t, func(o *config.Options) { o.Freshness = config.FreshOpen })
	got := make([]byte, 3)
	if err := c.Read(url, 0, 3, got, policy.TargetCPU, 0); err != nil || string(got) != "111" {
		t.Fatalf("first read: %q %v", got, err)
	}
	version.Store(2)
	if err := c.DropCache(url); err != nil {
		t.Fatal(err)
	}
	for _, off := range []uint64{0, 150000} {
		if err := c.Read(url, off, 3, got, policy.TargetCPU, 0); err != nil || string(got) != "222" {
			t.Fatalf("read at %d after drop_cache: %q %v", off, got, err)
		}
	}
	version.Store(3)
	if err := c.DropCache(""); err != nil {
		t.Fatal(err)
	}
	if err := c.Read(url, 150000, 3, got, policy.TargetCPU, 0); err != nil || string(got) != "333" {
		t.Fatalf("read after drop_cache of everything: %q %v", got, err)
	}
}

func TestRemoteRedirectIsNamed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	c := newCtx(t, nil)
	err := c.Read(srv.URL+"/x", 0, 1, make([]byte, 1), policy.TargetCPU, 0)
	if code(err) != errs.IO || !strings.Contains(err.Error(), "HTTP 302 (redirects are not followed; read the object at its final URL (Location: /elsewhere))") {
		t.Fatalf("redirect: %v", err)
	}
}

func TestRemoteBadURLsAreRefusedAtOnce(t *testing.T) {
	c := newCtx(t, nil)
	dst := make([]byte, 1)
	for _, tc := range []struct{ url, want string }{
		{"ftp://127.0.0.1/x", `unsupported scheme "ftp": want s3, http or https`},
		{"gs://bucket/x", `unsupported scheme "gs"`},
		{"http://127.0.0.1:99999/x", `invalid port "99999": want 1 to 65535`},
	} {
		err := c.Read(tc.url, 0, 1, dst, policy.TargetCPU, 0)
		if code(err) != errs.InvalidArg || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "attempts") {
			t.Errorf("%s: %v", tc.url, err)
		}
	}
}
