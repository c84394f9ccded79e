package remote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/smithy-go/aws-http-auth/credentials"
	"github.com/aws/smithy-go/aws-http-auth/sigv4"
	v4 "github.com/aws/smithy-go/aws-http-auth/v4"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/source"
)

// versitygwEnv names the versitygw binary (scripts/versitygw.sh prints it;
// the go_remote_versitygw ctest entry sets it). Unset: the integration
// tests skip. Set but broken: they fail.
const versitygwEnv = "MEMTIER_VERSITYGW"

const (
	vgwAccess = "memtier-test-access"
	vgwSecret = "memtier-test-secret-Zq8vPw3x"
	vgwBucket = "bkt"
)

// gateway is a versitygw serving a posix root on 127.0.0.1.
type gateway struct {
	endpoint string
	root     string // bucket = directory under root, object = file
}

// startVersitygw starts versitygw on a free loopback port in a temp root
// with bucket vgwBucket, waits until it answers HTTP, and stops it at the
// end of the test.
func startVersitygw(tb testing.TB) *gateway {
	tb.Helper()
	bin := os.Getenv(versitygwEnv)
	if bin == "" {
		tb.Skipf("%s is not set: run scripts/versitygw.sh and set %s to the path it prints (ctest go_remote_versitygw does)", versitygwEnv, versitygwEnv)
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		tb.Fatalf("%s=%s is not an executable file (%v)", versitygwEnv, bin, err)
	}
	root := tb.TempDir()
	if err := os.Mkdir(filepath.Join(root, vgwBucket), 0o755); err != nil {
		tb.Fatal(err)
	}
	var lastErr error
	for try := 0; try < 3; try++ { // a free port can be taken before versitygw binds it
		port, err := freePort()
		if err != nil {
			tb.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		var out bytes.Buffer
		// --keep-alive: versitygw closes every connection without it
		// (measured: one dial per request), unlike S3.
		cmd := exec.Command(bin, "--access", vgwAccess, "--secret", vgwSecret, "--port", addr, "--quiet", "--keep-alive", "posix", root)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			tb.Fatalf("start %s: %v", bin, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if err := waitHTTP("http://"+addr+"/", exited, 30*time.Second); err != nil {
			cmd.Process.Kill()
			lastErr = fmt.Errorf("versitygw on %s: %v; output: %s", addr, err, out.String())
			continue
		}
		tb.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
		})
		return &gateway{endpoint: "http://" + addr, root: root}
	}
	tb.Fatalf("%v", lastErr)
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitHTTP polls url until any HTTP answer, the process exits, or timeout.
func waitHTTP(url string, exited chan error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("exited: %v", err)
		default:
		}
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no answer within %v", timeout)
}

// options are Options for g with the given secret.
func (g *gateway) options(secret string) Options {
	o := fastOptions()
	o.Endpoint = g.endpoint
	o.Credentials = &Credentials{AccessKeyID: vgwAccess, SecretAccessKey: secret}
	return o
}

// put uploads data as key with a signed PUT (versitygw then stores an
// ETag, which plain files written into the root lack).
func (g *gateway) put(tb testing.TB, key string, data []byte) string {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPut, g.endpoint+"/"+vgwBucket+"/"+s3Escape(key), bytes.NewReader(data))
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(data)
	signer := sigv4.New(func(o *v4.SignerOptions) { o.DisableDoublePathEscape, o.AddPayloadHashHeader = true, true })
	err = signer.SignRequest(&sigv4.SignRequestInput{
		Request: req, PayloadHash: sum[:], Service: "s3", Region: DefaultRegion,
		Credentials: credentials.Credentials{AccessKeyID: vgwAccess, SecretAccessKey: vgwSecret},
	})
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("ETag") == "" {
		tb.Fatalf("PUT %s: %s, ETag %q", key, resp.Status, resp.Header.Get("ETag"))
	}
	return resp.Header.Get("ETag")
}

// seed writes data as a plain file (no ETag: versitygw keeps ETags in
// extended attributes set on upload).
func (g *gateway) seed(tb testing.TB, key string, data []byte) {
	tb.Helper()
	p := filepath.Join(g.root, vgwBucket, key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// noSecret fails if err's text holds the secret.
func noSecret(t *testing.T, err error) {
	t.Helper()
	if err != nil && (strings.Contains(err.Error(), vgwSecret) || strings.Contains(err.Error(), "WRONG-secret")) {
		t.Errorf("secret in message: %v", err)
	}
}

func TestVersitygw_ExactBytes(t *testing.T) {
	g := startVersitygw(t)
	big := pattern(2*MinPartBytes+3<<20+4321, 40) // three parts after the head window
	small := pattern(1000, 41)
	etag := g.put(t, "dir/big.bin", big)
	g.put(t, "small bin+x", small)
	g.put(t, "empty", nil)
	g.seed(t, "seeded/file.bin", big)
	c := newClient(t, g.options(vgwSecret))
	src := NewSource(c)
	for _, tc := range []struct {
		key  string
		data []byte
		etag string
	}{{"dir/big.bin", big, etag}, {"seeded/file.bin", big, ""}, {"small bin+x", small, "put"}} {
		o, _, err := src.Open("s3://"+vgwBucket+"/"+tc.key, files.TrustNone)
		if err != nil {
			t.Fatalf("%s: %v", tc.key, err)
		}
		ro := o.(*Object)
		if o.Size() != uint64(len(tc.data)) || (tc.etag != "" && tc.etag != "put" && ro.ETag() != tc.etag) ||
			(tc.etag == "" && (ro.ETag() != "" || ro.LastModified() == "")) {
			t.Errorf("%s: size %d etag %q last-modified %q", tc.key, o.Size(), ro.ETag(), ro.LastModified())
		}
		n := uint64(len(tc.data))
		for _, r := range [][2]uint64{
			{0, min(100, n)},          // start (head window)
			{n / 2, min(4096, n-n/2)}, // middle
			{n - 7, 7},                // tail
			{0, n},                    // whole
			{n / 3, n - n/3},          // across parts
			{65530, min(20, n-65530)}, // across the head window's end
		} {
			if r[0]+r[1] > n || r[1] == 0 {
				continue
			}
			dst := make([]byte, r[1])
			if _, err := src.ReadAt(o, dst, r[0], source.PathBuffered); err != nil {
				t.Fatalf("%s [%d, +%d): %v", tc.key, r[0], r[1], err)
			}
			if !bytes.Equal(dst, tc.data[r[0]:r[0]+r[1]]) {
				t.Errorf("%s [%d, +%d): bytes differ", tc.key, r[0], r[1])
			}
		}
		o.Release()
	}
	o, _, err := src.Open("s3://"+vgwBucket+"/empty", files.TrustNone)
	if err != nil {
		t.Fatalf("empty: %v", err)
	}
	if o.Size() != 0 || o.Version() == 0 {
		t.Errorf("empty: size %d version %d", o.Size(), o.Version())
	}
	o.Release()
	if st := c.Stats(); st.Retries != 0 || st.Failures != 0 {
		t.Errorf("stats %+v: retries or failures against a healthy server", st)
	}
}

func TestVersitygw_Errors(t *testing.T) {
	g := startVersitygw(t)
	g.put(t, "k", pattern(100, 42))
	src := NewSource(newClient(t, g.options(vgwSecret)))

	_, _, err := NewSource(newClient(t, g.options("WRONG-secret"))).Open("s3://"+vgwBucket+"/k", files.TrustNone)
	wantErr(t, err, errs.Permission, "remote open s3://bkt/k at offset 0: bytes [0, 65536): HTTP 403 SignatureDoesNotMatch: The request signature we calculated does not match")
	noSecret(t, err)

	_, _, err = src.Open("s3://"+vgwBucket+"/missing", files.TrustNone)
	wantErr(t, err, errs.NotFound, "remote open s3://bkt/missing at offset 0: bytes [0, 65536): HTTP 404 NoSuchKey: The specified key does not exist.")
	noSecret(t, err)

	_, _, err = src.Open("s3://nobucket/k", files.TrustNone)
	wantErr(t, err, errs.NotFound, "HTTP 404 NoSuchBucket: The specified bucket does not exist.")
	noSecret(t, err)

	// Unsigned against a signing server.
	ao := g.options(vgwSecret)
	ao.Anonymous = true
	_, _, err = NewSource(newClient(t, ao)).Open("s3://"+vgwBucket+"/k", files.TrustNone)
	wantErr(t, err, errs.Permission, "HTTP 403 AccessDenied")
}

// overwriteOn is a Transport that uploads new bytes once, right before the
// request whose Range starts at `at` goes out: an overwrite mid-read.
type overwriteOn struct {
	at   string
	do   func()
	done atomic.Bool
	rt   http.RoundTripper
}

func (o *overwriteOn) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.Header.Get("Range"), "bytes="+o.at+"-") && o.done.CompareAndSwap(false, true) {
		o.do()
	}
	return o.rt.RoundTrip(r)
}

func TestVersitygw_OverwriteMidRead(t *testing.T) {
	g := startVersitygw(t)
	v1, v2 := pattern(objSize, 43), pattern(objSize, 44)
	for _, kind := range []string{"uploaded", "seeded"} {
		t.Run(kind, func(t *testing.T) {
			key := "ow-" + kind
			mtime := time.Date(2020, 1, 1, 0, 0, 0, 500e6, time.UTC)
			write := func(data []byte) {
				if kind == "uploaded" {
					g.put(t, key, data)
					return
				}
				g.seed(t, key, data)
				// Without an ETag only Last-Modified tells versions apart, at
				// 1 s resolution: an overwrite within the same second is not
				// detectable (a documented limit), so the test moves it on.
				mtime = mtime.Add(10 * time.Second)
				if err := os.Chtimes(filepath.Join(g.root, vgwBucket, key), mtime, mtime); err != nil {
					t.Error(err)
				}
			}
			write(v1)
			o := g.options(vgwSecret)
			o.MaxConcurrency = 1
			o.Transport = &overwriteOn{at: secondPart, do: func() { write(v2) }, rt: http.DefaultTransport}
			c := newClient(t, o)
			_, err := openAndRead(t, c, "s3://"+vgwBucket+"/"+key, 0, objSize)
			wantErr(t, err, errs.IO, "remote read s3://bkt/"+key+" at offset 5308416: bytes [5308416, 10551296): ", "changed since open")
			noSecret(t, err)
			t.Logf("%s: %v", kind, err)
			if c.Stats().Retries != 0 {
				t.Errorf("a changed object was retried")
			}
		})
	}
}

func TestVersitygw_Revalidation(t *testing.T) {
	g := startVersitygw(t)
	g.put(t, "rv", pattern(5000, 45))
	c := newClient(t, g.options(vgwSecret))
	src := NewSource(c)
	o1, _, err := src.Open("s3://"+vgwBucket+"/rv", files.TrustNone)
	if err != nil {
		t.Fatal(err)
	}
	o1.Release()
	o2, stale, err := src.Open("s3://"+vgwBucket+"/rv", files.TrustNone)
	if err != nil || o2 != o1 || stale != 0 {
		t.Fatalf("unchanged revalidation: %v same=%v stale=%d", err, o2 == o1, stale)
	}
	o2.Release()
	g.put(t, "rv", pattern(6000, 46))
	o3, stale, err := src.Open("s3://"+vgwBucket+"/rv", files.TrustNone)
	if err != nil || o3.Size() != 6000 || stale != o1.Version() {
		t.Fatalf("changed revalidation: %v size=%d stale=%d", err, o3.Size(), stale)
	}
	o3.Release()
	if st := c.Stats(); st.Requests != 3 {
		t.Errorf("requests = %d, want 3 (one GET per Open)", st.Requests)
	}
}

// BenchmarkVersitygw256MiB reads a 256 MiB object from versitygw on
// loopback through remote.Source.ReadAt (8 MiB parts, conc= GETs in
// flight) and, in the same iteration, with one plain signed net/http GET of
// the whole object into the same buffer; it reports both rates and their
// ratio (memtier / single GET).
func BenchmarkVersitygw256MiB(b *testing.B) {
	g := startVersitygw(b)
	const size = 256 << 20
	data := pattern(size, 47)
	g.seed(b, "bench.bin", data)
	for _, conc := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) { benchReadAt(b, g, data, conc) })
	}
}

func benchReadAt(b *testing.B, g *gateway, data []byte, conc int) {
	size := len(data)
	o := g.options(vgwSecret)
	o.PartBytes = DefaultPartBytes
	o.MaxConcurrency = conc
	c, err := NewClient(o)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	src := NewSource(c)
	obj, _, err := src.Open("s3://"+vgwBucket+"/bench.bin", files.TrustForever)
	if err != nil {
		b.Fatal(err)
	}
	defer obj.Release()
	dst := make([]byte, size)
	loc, _ := ParseURL("s3://" + vgwBucket + "/bench.bin")
	var tMT, tOne time.Duration
	b.SetBytes(int64(size))
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := src.ReadAt(obj, dst, 0, source.PathBuffered); err != nil {
			b.Fatal(err)
		}
		tMT += time.Since(start)
		if !bytes.Equal(dst, data) {
			b.Fatal("bytes differ")
		}
		clear(dst)

		start = time.Now()
		req, err := c.newGet(context.Background(), loc, 0, uint64(size)-1, nil)
		if err != nil {
			b.Fatal(err)
		}
		// Range is not a signed header: without it the request is a plain
		// signed GET of the whole object.
		req.Header.Del("Range")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.ReadFull(resp.Body, dst)
		resp.Body.Close()
		if err != nil || n != size || resp.StatusCode != 200 {
			b.Fatalf("single GET: %d bytes, %v, %s", n, err, resp.Status)
		}
		tOne += time.Since(start)
		if !bytes.Equal(dst, data) {
			b.Fatal("single GET bytes differ")
		}
		clear(dst)
	}
	b.StopTimer()
	gbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / 1e9 }
	b.ReportMetric(gbps(tMT), "memtier_GB/s")
	b.ReportMetric(gbps(tOne), "single_get_GB/s")
	b.ReportMetric(gbps(tMT)/gbps(tOne), "ratio")
}

// TestVersitygw_KeepAlive: the pool reuses connections (versitygw answers
// with keep-alive), so a read of many parts at concurrency 1 dials once.
func TestVersitygw_KeepAlive(t *testing.T) {
	g := startVersitygw(t)
	data := pattern(objSize, 48)
	g.put(t, "ka", data)
	var dials atomic.Int64
	d := &net.Dialer{}
	o := g.options(vgwSecret)
	o.MaxConcurrency = 1
	o.Transport = &http.Transport{
		MaxIdleConnsPerHost: 1, DisableCompression: true,
		DialContext: func(ctx context.Context, nw, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, nw, addr)
		},
	}
	c := newClient(t, o)
	for range 2 {
		got, err := openAndRead(t, c, "s3://"+vgwBucket+"/ka", 0, objSize)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read: %v", err)
		}
	}
	if n, reqs := dials.Load(), c.Stats().Requests; n != 1 || reqs != 8 {
		t.Errorf("%d dials for %d requests, want 1 for 8", n, reqs)
	}
}
