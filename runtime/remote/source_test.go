package remote

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/source"
)

func TestSource_OpenCostsOneGETAndKeepsTheHead(t *testing.T) {
	data := pattern(100000, 20)
	s := newRangeServer(t, data)
	c := newClient(t, fastOptions())
	src := NewSource(c)
	o, stale, err := src.Open(s.URL+"/obj", files.TrustNone)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release()
	ro := o.(*Object)
	if stale != 0 || o.Size() != 100000 || ro.ETag() != `"v1"` || o.Name() != s.URL+"/obj" || o.Version() == 0 {
		t.Errorf("stale %d size %d etag %s name %s version %d", stale, o.Size(), ro.ETag(), o.Name(), o.Version())
	}
	if s.requests() != 1 {
		t.Fatalf("Open sent %d requests, want 1", s.requests())
	}
	// A header read inside the 64 KiB window: no request.
	hdr := make([]byte, 8)
	if _, err := src.ReadAt(o, hdr, 0, source.PathBuffered); err != nil || !bytes.Equal(hdr, data[:8]) {
		t.Fatalf("head read: %v", err)
	}
	if s.requests() != 1 {
		t.Errorf("head read sent a request")
	}
	// Across the window's end: one GET for the rest only.
	dst := make([]byte, 100000-60000)
	if _, err := src.ReadAt(o, dst, 60000, source.PathBuffered); err != nil || !bytes.Equal(dst, data[60000:]) {
		t.Fatalf("read across the head: %v", err)
	}
	if rs := s.rangesSeen(); len(rs) != 2 || rs[1] != "bytes=65536-99999" {
		t.Errorf("ranges = %q", rs)
	}
	if n, known := src.Resident(o, 0, 100, 4); n != 0 || !known {
		t.Errorf("Resident = %d, %v", n, known)
	}
	if src.ReadNoWait(o, hdr, 0) || src.DirectRefused(o) {
		t.Error("ReadNoWait or DirectRefused true")
	}
}

func TestSource_OneByteOpenWindow(t *testing.T) {
	data := pattern(10<<20+1, 21)
	s := newRangeServer(t, data)
	o := fastOptions()
	o.OpenBytes = -1
	o.MaxConcurrency = 1 // parts in order
	c := newClient(t, o)
	got, err := openAndRead(t, c, s.URL+"/obj", 0, uint64(len(data)))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read: %v", err)
	}
	want := "bytes=0-0 bytes=1-5242880 bytes=5242881-10485760"
	if rs := strings.Join(s.rangesSeen(), " "); rs != want {
		t.Errorf("ranges %q, want %q", rs, want)
	}
}

func TestSource_TrustAndRevalidation(t *testing.T) {
	s := newRangeServer(t, pattern(1000, 22))
	c := newClient(t, fastOptions())
	src := NewSource(c)
	now := time.Unix(1000, 0)
	src.now = func() time.Time { return now }
	name := s.URL + "/obj"
	o1, _, err := src.Open(name, files.TrustNone)
	if err != nil {
		t.Fatal(err)
	}
	o1.Release()

	// Within trust, and forever: no request.
	now = now.Add(time.Second)
	for _, trust := range []time.Duration{2 * time.Second, files.TrustForever} {
		o, stale, err := src.Open(name, trust)
		if err != nil || o != o1 || stale != 0 {
			t.Fatalf("trusted Open: %v %v %d", err, o == o1, stale)
		}
		o.Release()
	}
	if s.requests() != 1 {
		t.Fatalf("trusted Opens sent requests: %d", s.requests())
	}
	// Past trust: a revalidation answered 304 keeps the Object.
	o, stale, err := src.Open(name, 500*time.Millisecond)
	if err != nil || o != o1 || stale != 0 {
		t.Fatalf("revalidated Open: %v same=%v stale=%d", err, o == o1, stale)
	}
	o.Release()
	if s.requests() != 2 {
		t.Fatalf("requests = %d, want 2", s.requests())
	}
	// Overwritten: a new version, and the old one is reported stale.
	s.set(pattern(2000, 23), `"v2"`)
	o2, stale, err := src.Open(name, files.TrustNone)
	if err != nil {
		t.Fatal(err)
	}
	defer o2.Release()
	if o2 == o1 || o2.Size() != 2000 || stale != o1.Version() || o2.Version() == o1.Version() {
		t.Errorf("after overwrite: size %d stale %d (old %d) new version %d", o2.Size(), stale, o1.Version(), o2.Version())
	}
	// The old Object's head was dropped with its version: a read of it is
	// pinned to "v1" and fails loudly instead of returning v2's bytes.
	_, err = src.ReadAt(o1, make([]byte, 10), 0, source.PathBuffered)
	wantErr(t, err, errs.IO, `bytes [0, 10): HTTP 412 PreconditionFailed`, `changed since open: the server refused If-Match "v1"`)
	// Deleted: NotFound, and the remembered version is stale.
	s.fault = func(w http.ResponseWriter, r *http.Request, n int) bool {
		xmlError(w, 404, "NoSuchKey", "The specified key does not exist.")
		return true
	}
	_, stale, err = src.Open(name, files.TrustNone)
	wantErr(t, err, errs.NotFound, "NoSuchKey")
	if stale != o2.Version() {
		t.Errorf("stale after delete = %d, want %d", stale, o2.Version())
	}
}

func TestSource_VersionHashesAddressAndETag(t *testing.T) {
	c := newClient(t, fastOptions())
	a, _ := ParseURL("http://h/x?X-Amz-Signature=1&X-Amz-Date=2&v=3")
	b, _ := ParseURL("http://h/x?X-Amz-Signature=9&v=3")
	if c.versionAddr(a) != c.versionAddr(b) || c.versionAddr(a) != "http://h/x?v=3" {
		t.Errorf("presign parameters in the version: %s vs %s", c.versionAddr(a), c.versionAddr(b))
	}
	v1 := versionOf("x", validator{etag: `"a"`, size: 1})
	if v1 == 0 || v1 == versionOf("x", validator{etag: `"b"`, size: 1}) || v1 == versionOf("y", validator{etag: `"a"`, size: 1}) {
		t.Error("version does not separate ETags or addresses")
	}
}

func TestSource_BadNameAndRange(t *testing.T) {
	c := newClient(t, fastOptions())
	src := NewSource(c)
	_, _, err := src.Open("/local/file", files.TrustNone)
	wantErr(t, err, errs.InvalidArg, "not a URL")
	s := newRangeServer(t, pattern(10, 24))
	o, _, err := src.Open(s.URL+"/o", files.TrustNone)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release()
	_, err = src.ReadAt(o, make([]byte, 5), 8, source.PathBuffered)
	wantErr(t, err, errs.EOF, "at offset 8: range [8, 13) is past the end of the object (10 bytes)")
}

func TestSource_ReleaseTwicePanics(t *testing.T) {
	s := newRangeServer(t, pattern(10, 25))
	src := NewSource(newClient(t, fastOptions()))
	o, _, err := src.Open(s.URL+"/o", files.TrustNone)
	if err != nil {
		t.Fatal(err)
	}
	o.Release()
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "Release without a matching Open") {
			t.Errorf("panic = %v", p)
		}
	}()
	o.Release()
}

// TestSource_SignedS3AndSecretScrubbed: s3:// requests carry a SigV4
// Authorization and the payload hash header, path-style under the
// endpoint's prefix, with the key escaped; a server message that echoes
// the secret or token is scrubbed.
func TestSource_SignedS3AndSecretScrubbed(t *testing.T) {
	const secret, token = "SECRETsecretSECRET", "TOKENtokenTOKEN"
	var gotPath, gotAuth, gotSha, gotTok string
	s := newRangeServer(t, nil)
	s.fault = func(w http.ResponseWriter, r *http.Request, n int) bool {
		gotPath, gotAuth = r.URL.EscapedPath(), r.Header.Get("Authorization")
		gotSha, gotTok = r.Header.Get("X-Amz-Content-Sha256"), r.Header.Get("X-Amz-Security-Token")
		xmlError(w, 403, "SignatureDoesNotMatch", "secret "+secret+" token "+token)
		return true
	}
	o := fastOptions()
	o.Endpoint = s.URL + "/prefix/"
	o.Region = "eu-west-3"
	o.Credentials = &Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: secret, SessionToken: token}
	c := newClient(t, o)
	_, _, err := NewSource(c).Open("s3://bkt/dir/a b+c.bin", files.TrustNone)
	wantErr(t, err, errs.Permission, "remote open s3://bkt/dir/a b+c.bin at offset 0: bytes [0, 65536): HTTP 403 SignatureDoesNotMatch: secret [redacted] token [redacted]",
		"(credentials from Options.Credentials)")
	if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), token) {
		t.Errorf("secret in message: %v", err)
	}
	if gotPath != "/prefix/bkt/dir/a%20b%2Bc.bin" {
		t.Errorf("path = %q", gotPath)
	}
	if !strings.HasPrefix(gotAuth, "AWS4-HMAC-SHA256 Credential=AKIDTEST/") || !strings.Contains(gotAuth, "/eu-west-3/s3/aws4_request") ||
		!strings.Contains(gotAuth, "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token") {
		t.Errorf("Authorization = %q", gotAuth)
	}
	if gotSha != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" || gotTok != token {
		t.Errorf("sha %q token %q", gotSha, gotTok)
	}
	if cs := (Credentials{AccessKeyID: "A", SecretAccessKey: secret, SessionToken: token}); strings.Contains(cs.String()+cs.GoString(), secret) {
		t.Error("Credentials.String prints the secret")
	}
}

func TestSource_NoCredentialsIsPermission(t *testing.T) {
	c := newClient(t, fastOptions())
	_, _, err := NewSource(c).Open("s3://b/k", files.TrustNone)
	wantErr(t, err, errs.Permission, "remote open s3://b/k: no AWS credentials: set AWS_ACCESS_KEY_ID")
	// The settings are read once per context (a fresh-user finding: setting
	// os.environ after the error and retrying gave the same error).
	wantErr(t, err, errs.Permission, "(read when this context first used a URL: after changing the environment, use a new context)")
	// Anonymous s3:// is unsigned.
	s := newRangeServer(t, pattern(10, 26))
	var auth string
	s.fault = func(w http.ResponseWriter, r *http.Request, n int) bool {
		auth = r.Header.Get("Authorization")
		return false
	}
	o := fastOptions()
	o.Anonymous, o.Endpoint = true, s.URL
	src := NewSource(newClient(t, o))
	obj, _, err := src.Open("s3://b/k", files.TrustNone)
	if err != nil || auth != "" || obj.Size() != 10 {
		t.Fatalf("anonymous: %v auth=%q", err, auth)
	}
	obj.Release()
}
