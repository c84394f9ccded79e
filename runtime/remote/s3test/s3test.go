// Package s3test starts versitygw, a real S3 gateway with SigV4, for the
// integration tests of runtime/remote, runtime/diskcache and runtime/engine.
// It is imported only by tests (_test.go files); no program links it.
//
// MEMTIER_VERSITYGW names the versitygw binary (scripts/versitygw.sh prints
// it; the go_remote_versitygw ctest entry sets it). Unset: the tests that
// call Start skip. Set but broken: they fail.
//
// It imports nothing of memtier, so that runtime/remote's own (internal)
// tests can import it without an import cycle.
package s3test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/smithy-go/aws-http-auth/credentials"
	"github.com/aws/smithy-go/aws-http-auth/sigv4"
	v4 "github.com/aws/smithy-go/aws-http-auth/v4"
)

// Env names the environment variable that holds the versitygw binary.
const Env = "MEMTIER_VERSITYGW"

// The gateway's credentials, its one bucket and the region requests are
// signed for (remote.DefaultRegion).
const (
	Access = "memtier-test-access"
	Secret = "memtier-test-secret-Zq8vPw3x"
	Bucket = "bkt"
	Region = "us-east-1"
)

// Gateway is a versitygw serving a posix root on 127.0.0.1: bucket Bucket
// is the directory Root/Bucket, an object a file under it.
type Gateway struct {
	Endpoint string // "http://127.0.0.1:PORT"
	Root     string // the posix root
	Bucket   string
	Access   string
	Secret   string
	Region   string
	Pid      int // the versitygw process (benchmarks read its CPU time)
}

// Start starts versitygw on a free loopback port in a temp root holding
// bucket Bucket, waits until it answers HTTP, and stops it when tb ends.
// It skips tb when MEMTIER_VERSITYGW is unset.
func Start(tb testing.TB) *Gateway {
	tb.Helper()
	bin := os.Getenv(Env)
	if bin == "" {
		tb.Skipf("%s is not set: run scripts/versitygw.sh and set %s to the path it prints (ctest go_remote_versitygw does)", Env, Env)
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		tb.Fatalf("%s=%s is not an executable file (%v)", Env, bin, err)
	}
	root := tb.TempDir()
	if err := os.Mkdir(filepath.Join(root, Bucket), 0o755); err != nil {
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
		cmd := exec.Command(bin, "--access", Access, "--secret", Secret, "--port", addr, "--quiet", "--keep-alive", "posix", root)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			tb.Fatalf("start %s: %v", bin, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if err := waitHTTP("http://"+addr+"/", exited, 30*time.Second); err != nil {
			cmd.Process.Kill()
			<-exited
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
		return &Gateway{Endpoint: "http://" + addr, Root: root, Bucket: Bucket, Access: Access, Secret: Secret, Region: Region, Pid: cmd.Process.Pid}
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

// URL is the s3:// URL of key in the bucket.
func (g *Gateway) URL(key string) string { return "s3://" + g.Bucket + "/" + key }

// Put uploads data as key with a signed PUT and returns the ETag versitygw
// answers with (it keeps ETags in extended attributes set on upload, which
// files written by Seed lack).
func (g *Gateway) Put(tb testing.TB, key string, data []byte) (etag string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPut, g.Endpoint+"/"+g.Bucket+"/"+escape(key), bytes.NewReader(data))
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(data)
	signer := sigv4.New(func(o *v4.SignerOptions) { o.DisableDoublePathEscape, o.AddPayloadHashHeader = true, true })
	err = signer.SignRequest(&sigv4.SignRequestInput{
		Request: req, PayloadHash: sum[:], Service: "s3", Region: g.Region,
		Credentials: credentials.Credentials{AccessKeyID: g.Access, SecretAccessKey: g.Secret},
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

// Seed writes data as the plain file of key under the bucket (versitygw
// then answers with Last-Modified and no ETag). The file is written aside
// and renamed into place, so versitygw never serves half of it.
func (g *Gateway) Seed(tb testing.TB, key string, data []byte) {
	tb.Helper()
	p := g.Path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p+".part", data, 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(p+".part", p); err != nil {
		tb.Fatal(err)
	}
}

// Path is the file that holds key.
func (g *Gateway) Path(key string) string { return filepath.Join(g.Root, g.Bucket, key) }

// escape percent-encodes key as SigV4's canonical URI wants it (as
// runtime/remote's client does): every byte but A-Z a-z 0-9 - . _ ~ and /.
func escape(key string) string {
	var b strings.Builder
	for _, c := range []byte(key) {
		if strings.IndexByte("-._~/", c) >= 0 || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// Pattern returns n bytes of test data that vary with the offset (so a
// misplaced part or block shows) and with seed.
func Pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i) ^ byte(i>>8) ^ byte(i>>16)*7 ^ seed
	}
	return b
}
