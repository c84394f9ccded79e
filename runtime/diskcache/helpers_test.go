package diskcache

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/remote/s3test"
	"github.com/memtier/memtier/runtime/source"
)

// pattern returns n bytes of test data that vary with the offset and seed.
var pattern = s3test.Pattern

// testBlock is the block size of most tests: the smallest, so objects of
// a few MiB span many blocks.
const testBlock = MinBlockBytes

// objServer serves one object at /obj.bin by http.ServeContent (206 with
// Content-Range, ETag, If-Match, If-None-Match) and counts its GETs.
type objServer struct {
	*httptest.Server
	mu     sync.Mutex
	data   []byte
	etag   string
	gets   atomic.Int64
	ranges []string
}

func newObjServer(t testing.TB, data []byte, etag string) *objServer {
	s := &objServer{data: data, etag: etag}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/obj.bin" {
			http.NotFound(w, r)
			return
		}
		s.gets.Add(1)
		s.mu.Lock()
		data, etag := s.data, s.etag
		s.ranges = append(s.ranges, r.Header.Get("Range"))
		s.mu.Unlock()
		if etag != "" {
			w.Header().Set("ETag", etag)
		}
		http.ServeContent(w, r, "obj.bin", time.Unix(1700000000, 0), bytes.NewReader(data))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *objServer) set(data []byte, etag string) {
	s.mu.Lock()
	s.data, s.etag = data, etag
	s.mu.Unlock()
}

func (s *objServer) url() string { return s.URL + "/obj.bin" }

// testOptions are remote Options with an empty environment.
func testOptions() remote.Options {
	env := map[string]string{"HOME": "/nonexistent-home-for-tests"}
	return remote.Options{
		PartBytes:     remote.MinPartBytes,
		BackoffBase:   time.Millisecond,
		BackoffMax:    4 * time.Millisecond,
		HeaderTimeout: 5 * time.Second,
		StallTimeout:  5 * time.Second,
		Getenv:        func(k string) string { return env[k] },
	}
}

// stack is one "process": a remote Source and a Cache over dir.
type stack struct {
	src *Source
	c   *Cache
}

// secondProcess serves want (ETag etag) from a new object server, fills a
// new disk cache directory (block bytes blockBytes, 0: testBlock) with one
// read of all of it through a first stack, and returns the server and a
// second stack over that directory: the next process, finding the entries.
func secondProcess(t testing.TB, want []byte, etag string, blockBytes int) (*objServer, *stack) {
	t.Helper()
	srv := newObjServer(t, want, etag)
	o := Options{Dir: t.TempDir(), Synchronous: true, BlockBytes: blockBytes}
	newStack(t, testOptions(), o).read(t, srv.url(), 0, uint64(len(want)))
	return srv, newStack(t, testOptions(), o)
}

func newStack(t testing.TB, ro remote.Options, o Options) *stack {
	t.Helper()
	cl, err := remote.NewClient(ro)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	if o.BlockBytes == 0 {
		o.BlockBytes = testBlock
	}
	c, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return &stack{src: NewSource(remote.NewSource(cl), c), c: c}
}

// read opens name and reads [off, off+n) through the disk cache.
func (s *stack) read(t testing.TB, name string, off, n uint64) []byte {
	t.Helper()
	o, _, err := s.src.Open(name, files.TrustNone)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer o.Release()
	dst := make([]byte, n)
	used, err := s.src.ReadAt(o, dst, off, source.PathBuffered)
	if err != nil {
		t.Fatalf("read [%d, +%d): %v", off, n, err)
	}
	if used != source.PathBuffered {
		t.Fatalf("used path %d", used)
	}
	return dst
}

// entries lists the entry files of dir and their total size with
// temporary files (what the budget counts).
func entries(t testing.TB, dir string) (names []string, total int64) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		n := de.Name()
		if !strings.HasSuffix(n, entrySuffix) && !strings.HasPrefix(n, tmpPrefix) {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		total += info.Size()
		if strings.HasSuffix(n, entrySuffix) {
			names = append(names, filepath.Join(dir, n))
		}
	}
	return names, total
}

// entrySize is the file size of a full entry of key-length texts.
func entrySize(k *Key, payload int) int64 { return int64(headerLen(k, payload) + payload) }
