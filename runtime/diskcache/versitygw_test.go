package diskcache

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aws/smithy-go/aws-http-auth/credentials"
	"github.com/aws/smithy-go/aws-http-auth/sigv4"
	v4 "github.com/aws/smithy-go/aws-http-auth/v4"

	"github.com/memtier/memtier/runtime/remote"
)

// versitygw on 127.0.0.1, as runtime/remote's versitygw_test.go starts it
// (MEMTIER_VERSITYGW names the binary; scripts/versitygw.sh prints it).
const (
	vgwEnv    = "MEMTIER_VERSITYGW"
	vgwAccess = "memtier-test-access"
	vgwSecret = "memtier-test-secret-Dk4uQ9sB"
	vgwBucket = "bkt"
)

type gateway struct {
	endpoint string
	root     string
}

func startVersitygw(tb testing.TB) *gateway {
	tb.Helper()
	bin := os.Getenv(vgwEnv)
	if bin == "" {
		tb.Skipf("%s is not set: run scripts/versitygw.sh and set %s to the path it prints", vgwEnv, vgwEnv)
	}
	root := tb.TempDir()
	if err := os.Mkdir(filepath.Join(root, vgwBucket), 0o755); err != nil {
		tb.Fatal(err)
	}
	for try := 0; try < 3; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		var out bytes.Buffer
		cmd := exec.Command(bin, "--access", vgwAccess, "--secret", vgwSecret, "--port", addr, "--quiet", "--keep-alive", "posix", root)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			tb.Fatalf("start %s: %v", bin, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		up := false
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !up; {
			select {
			case <-exited:
				deadline = time.Time{}
				continue
			default:
			}
			if resp, err := http.Get("http://" + addr + "/"); err == nil {
				resp.Body.Close()
				up = true
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !up {
			cmd.Process.Kill()
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
	tb.Fatal("versitygw did not start")
	return nil
}

func (g *gateway) options() remote.Options {
	o := testOptions()
	o.Endpoint = g.endpoint
	o.Credentials = &remote.Credentials{AccessKeyID: vgwAccess, SecretAccessKey: vgwSecret}
	return o
}

// put uploads data as key with a signed PUT (versitygw then keeps an ETag)
// and returns the ETag.
func (g *gateway) put(tb testing.TB, key string, data []byte) string {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPut, g.endpoint+"/"+vgwBucket+"/"+key, bytes.NewReader(data))
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(data)
	signer := sigv4.New(func(o *v4.SignerOptions) { o.DisableDoublePathEscape, o.AddPayloadHashHeader = true, true })
	if err := signer.SignRequest(&sigv4.SignRequestInput{
		Request: req, PayloadHash: sum[:], Service: "s3", Region: remote.DefaultRegion,
		Credentials: credentials.Credentials{AccessKeyID: vgwAccess, SecretAccessKey: vgwSecret},
	}); err != nil {
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

// seed writes data as a plain file under the bucket (no ETag: versitygw
// answers with Last-Modified only).
func (g *gateway) seed(tb testing.TB, key string, data []byte) {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(g.root, vgwBucket, key), data, 0o644); err != nil {
		tb.Fatal(err)
	}
}

func TestVersitygwRandomRangesAndSecondInstance(t *testing.T) {
	g := startVersitygw(t)
	want := pattern(30*testBlock+4321, 12)
	g.put(t, "put.bin", want)
	g.seed(t, "seeded.bin", want)
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
			noSecretIn(t, dir, vgwSecret)
		})
	}
	// An overwrite (new ETag) gives the new bytes in a fresh instance.
	neu := pattern(len(want), 99)
	g.put(t, "put.bin", neu)
	s := newStack(t, g.options(), Options{Dir: t.TempDir()})
	s.read(t, "s3://"+vgwBucket+"/put.bin", 0, 10)
	g.put(t, "put.bin", want)
	if got := s.read(t, "s3://"+vgwBucket+"/put.bin", 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal(fmt.Sprintf("after overwrite: old bytes (stats %+v)", s.c.Stats()))
	}
}
