package remote

import (
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/memtier/memtier/runtime/errs"
)

// Kind is the kind of remote name a Location holds.
type Kind int

// Location kinds.
const (
	KindS3   Kind = 1 // s3://bucket/key, signed, against the S3 endpoint
	KindHTTP Kind = 2 // http:// or https://, unsigned, the URL as given
)

// Location is a parsed remote name. It is a value; the zero Location is not
// valid.
type Location struct {
	Kind   Kind
	Bucket string   // KindS3: the bucket
	Key    string   // KindS3: the object key, verbatim (s3:// names are not percent-decoded)
	URL    *url.URL // KindHTTP: the address, with any query (a presigned URL) kept
	name   string   // as given to ParseURL
}

// Limits on s3:// names (AWS: bucket names are 3 to 63 characters; legacy
// us-east-1 buckets and S3-compatible servers allow up to 255 and '_' and
// capitals, so MemTier accepts that wider set and lets the server judge).
const (
	maxBucketLen = 255
	maxKeyLen    = 1024 // bytes, S3's key limit
)

// HasScheme reports whether name starts with a URL scheme and "://"
// (RFC 3986: a letter, then letters, digits, '+', '-' or '.'), whether or not
// this package reads it: such a name is a URL the caller should refuse by
// name, not a local path to look for.
func HasScheme(name string) bool {
	i := strings.Index(name, "://")
	if i <= 0 {
		return false
	}
	for j := 0; j < i; j++ {
		c := name[j]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (j == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}

// IsURL reports whether name has a scheme this package reads (s3://, http://
// or https://, case-insensitive), so a caller can route it here instead of to
// the local file system. It does not validate the rest of name.
func IsURL(name string) bool {
	i := strings.Index(name, "://")
	if i <= 0 {
		return false
	}
	switch strings.ToLower(name[:i]) {
	case "s3", "http", "https":
		return true
	}
	return false
}

// ParseURL parses name as s3://bucket/key, http://host/path or
// https://host/path. Bad names are errs.InvalidArg with the reason: a missing
// bucket, key or host, characters S3 does not allow in a bucket name, a key
// over 1024 bytes or not UTF-8, credentials in the URL (user:password@ would
// end up in error messages), or another scheme.
func ParseURL(name string) (Location, error) {
	bad := func(format string, args ...any) (Location, error) {
		return Location{}, errs.At(errs.InvalidArg, "parse URL", Redact(name), -1, format, args...)
	}
	i := strings.Index(name, "://")
	if i <= 0 {
		return bad("not a URL: want s3://bucket/key, http://host/path or https://host/path")
	}
	switch scheme := strings.ToLower(name[:i]); scheme {
	case "s3":
		rest := name[i+3:]
		slash := strings.IndexByte(rest, '/')
		if slash < 0 {
			if rest == "" {
				return bad("no bucket: want s3://bucket/key")
			}
			return bad("no key after the bucket %q: want s3://bucket/key", rest)
		}
		bucket, key := rest[:slash], rest[slash+1:]
		if bucket == "" {
			return bad("no bucket: want s3://bucket/key")
		}
		if len(bucket) > maxBucketLen {
			return bad("bucket name is %d characters, more than %d", len(bucket), maxBucketLen)
		}
		for j := 0; j < len(bucket); j++ {
			if c := bucket[j]; !isBucketChar(c) {
				return bad("bucket name %q has %q: allowed are letters, digits, '.', '-' and '_'", bucket, rune(c))
			}
		}
		if key == "" {
			return bad("no key after the bucket %q: want s3://bucket/key", bucket)
		}
		if len(key) > maxKeyLen {
			return bad("key is %d bytes, more than S3's %d", len(key), maxKeyLen)
		}
		if !utf8.ValidString(key) {
			return bad("key is not valid UTF-8")
		}
		for _, r := range key {
			if r < 0x20 || r == 0x7f {
				return bad("key has control character %U", r)
			}
		}
		return Location{Kind: KindS3, Bucket: bucket, Key: key, name: name}, nil
	case "http", "https":
		u, err := url.Parse(name)
		if err != nil {
			// url.Error repeats the whole URL, query included: keep only the reason.
			var why string
			if ue, ok := err.(*url.Error); ok {
				why = ue.Err.Error()
			} else {
				why = "malformed"
			}
			return bad("malformed URL: %s", why)
		}
		if u.User != nil {
			return bad("credentials in the URL (user@host) are not supported: they would appear in messages")
		}
		if u.Host == "" || u.Hostname() == "" {
			return bad("no host: want %s://host/path", scheme)
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return bad("invalid port %q: want 1 to 65535", p)
			}
		}
		u.Scheme = scheme
		u.Fragment, u.RawFragment = "", ""
		return Location{Kind: KindHTTP, URL: u, name: name}, nil
	default:
		return bad("unsupported scheme %q: want s3, http or https", name[:i])
	}
}

func isBucketChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '-' || c == '_'
}

// Name returns the name the Location was parsed from.
func (l Location) Name() string { return l.name }

// String returns the Location for messages: s3://bucket/key, or the HTTP URL
// with its query replaced by "?..." (a presigned URL's query is a
// credential).
func (l Location) String() string {
	if l.Kind == KindS3 {
		return "s3://" + l.Bucket + "/" + l.Key
	}
	return Redact(l.name)
}

// Redact returns name fit for a message: an http(s) URL loses its user info
// and its query (a presigned signature); anything else is returned as is.
func Redact(name string) string {
	i := strings.Index(name, "://")
	if i <= 0 {
		return name
	}
	scheme := strings.ToLower(name[:i])
	if scheme != "http" && scheme != "https" {
		return name
	}
	rest := name[i+3:]
	if j := strings.IndexAny(rest, "#"); j >= 0 {
		rest = rest[:j]
	}
	query := false
	if j := strings.IndexByte(rest, '?'); j >= 0 {
		rest, query = rest[:j], true
	}
	// user info ends at the last '@' before the path.
	host := rest
	if j := strings.IndexByte(rest, '/'); j >= 0 {
		host = rest[:j]
	}
	if j := strings.LastIndexByte(host, '@'); j >= 0 {
		rest = rest[j+1:]
	}
	out := name[:i+3] + rest
	if query {
		out += "?..."
	}
	return out
}
