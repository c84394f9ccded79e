package remote

import (
	"strings"
	"testing"

	"github.com/memtier/memtier/runtime/errs"
)

func TestParseURL_Good(t *testing.T) {
	for _, tc := range []struct {
		in                string
		kind              Kind
		bucket, key, show string
	}{
		{"s3://bkt/key", KindS3, "bkt", "key", "s3://bkt/key"},
		{"S3://my.bucket-1/a/b/c.safetensors", KindS3, "my.bucket-1", "a/b/c.safetensors", "s3://my.bucket-1/a/b/c.safetensors"},
		{"s3://b/k?x=1#y", KindS3, "b", "k?x=1#y", "s3://b/k?x=1#y"}, // verbatim: '?' and '#' are key characters
		{"s3://b/dir/", KindS3, "b", "dir/", "s3://b/dir/"},
		{"http://host:8080/p/q", KindHTTP, "", "", "http://host:8080/p/q"},
		{"https://host/p?X-Amz-Signature=abc#frag", KindHTTP, "", "", "https://host/p?..."},
	} {
		l, err := ParseURL(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if l.Kind != tc.kind || l.Bucket != tc.bucket || l.Key != tc.key || l.String() != tc.show || l.Name() != tc.in {
			t.Errorf("%s: got %+v %q", tc.in, l, l.String())
		}
		if !IsURL(tc.in) {
			t.Errorf("IsURL(%q) false", tc.in)
		}
	}
}

func TestParseURL_Bad(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/local/path", "not a URL"},
		{"s3:/b/k", "not a URL"},
		{"ftp://h/x", `unsupported scheme "ftp"`},
		{"s3://", "no bucket"},
		{"s3:///k", "no bucket"},
		{"s3://bkt", `no key after the bucket "bkt"`},
		{"s3://bkt/", `no key after the bucket "bkt"`},
		{"s3://b@d/k", `bucket name "b@d" has '@'`},
		{"s3://" + strings.Repeat("b", 256) + "/k", "bucket name is 256 characters"},
		{"s3://b/" + strings.Repeat("k", 1025), "key is 1025 bytes"},
		{"s3://b/\xff", "not valid UTF-8"},
		{"s3://b/a\x01", "control character U+0001"},
		{"http:///path", "no host"},
		{"https://user:pw@host/x", "credentials in the URL"},
		{"http://h/%zz", "malformed URL"},
	} {
		_, err := ParseURL(tc.in)
		if err == nil {
			t.Errorf("%q: no error", tc.in)
			continue
		}
		if errs.CodeOf(err) != errs.InvalidArg || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v (%v), want InvalidArg with %q", tc.in, err, errs.CodeOf(err), tc.want)
		}
		if strings.Contains(err.Error(), "pw@") {
			t.Errorf("%q: password in message %v", tc.in, err)
		}
	}
	if IsURL("/x") || IsURL("file://x") || IsURL("://x") {
		t.Error("IsURL true for a non-remote name")
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://u:p@h/x?sig=1":   "https://h/x?...",
		"http://h/a@b":            "http://h/a@b",
		"http://h/x#frag":         "http://h/x",
		"s3://b/k?x":              "s3://b/k?x",
		"/plain/path":             "/plain/path",
		"HTTPS://h/p?X-Amz-Cred=": "HTTPS://h/p?...",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHasScheme(t *testing.T) {
	for name, want := range map[string]bool{
		"s3://b/k": true, "ftp://h/x": true, "gs://b/o": true, "git+ssh://h/x": true,
		"/data/x.bin": false, "rel/a://b": false, "://x": false, "1ab://x": false, "C:/x": false,
	} {
		if got := HasScheme(name); got != want {
			t.Errorf("HasScheme(%q) = %v, want %v", name, got, want)
		}
	}
}
