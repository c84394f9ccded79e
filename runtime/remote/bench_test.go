package remote

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/source"
)

// BenchmarkLoopbackHTTP256MiB separates the client's cost from
// versitygw's: a 256 MiB object served from memory by net/http's own
// range support (http.ServeContent) on loopback, read by remote.Source
// (8 MiB parts, 16 in flight) and, in the same iteration, by one plain GET;
// it reports both rates and their ratio.
func BenchmarkLoopbackHTTP256MiB(b *testing.B) {
	const size = 256 << 20
	data := pattern(size, 49)
	mod := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"bench"`)
		http.ServeContent(w, r, "bench.bin", mod, bytes.NewReader(data))
	}))
	defer srv.Close()
	o := fastOptions()
	o.PartBytes = DefaultPartBytes
	c, err := NewClient(o)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	src := NewSource(c)
	obj, _, err := src.Open(srv.URL+"/bench.bin", files.TrustForever)
	if err != nil {
		b.Fatal(err)
	}
	defer obj.Release()
	dst := make([]byte, size)
	var tMT, tOne time.Duration
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := src.ReadAt(obj, dst, 0, source.PathBuffered); err != nil {
			b.Fatal(err)
		}
		tMT += time.Since(start)
		start = time.Now()
		resp, err := http.Get(srv.URL + "/bench.bin")
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.ReadFull(resp.Body, dst)
		resp.Body.Close()
		if err != nil || n != size {
			b.Fatalf("single GET: %d, %v", n, err)
		}
		tOne += time.Since(start)
	}
	b.StopTimer()
	if !bytes.Equal(dst, data) {
		b.Fatal("bytes differ")
	}
	gbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / 1e9 }
	b.ReportMetric(gbps(tMT), "memtier_GB/s")
	b.ReportMetric(gbps(tOne), "single_get_GB/s")
	b.ReportMetric(gbps(tMT)/gbps(tOne), "ratio")
}
