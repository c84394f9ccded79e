package remote

import (
	"hash/fnv"
	"net/url"
	"strings"
	"sync/atomic"
)

// Object is one version of a remote object, as Source.Open found it: its
// size from Content-Range, its validator (ETag, else Last-Modified) that
// every later GET is pinned to, and the first bytes Open fetched. Its
// methods do no I/O and are safe for concurrent use; each holder calls
// Release exactly once.
type Object struct {
	name    string
	loc     Location
	val     validator
	version uint64
	head    atomic.Pointer[[]byte] // bytes [0, len) of the object, nil once dropped
	refs    atomic.Int64
}

// Name returns the name given to Source.Open.
func (o *Object) Name() string { return o.name }

// Version returns a nonzero hash of the object's address (endpoint, bucket
// and key, or the URL without presigning parameters) and its validator
// (ETag, else Last-Modified and size), so another version of the bytes, or
// the same key on another server, has another Version.
func (o *Object) Version() uint64 { return o.version }

// Size returns the object's size in bytes, from the Content-Range of Open's
// GET.
func (o *Object) Size() uint64 { return o.val.size }

// ETag returns the object's ETag as the server sent it (quotes included),
// or "" when the server sent none (plain HTTP servers, versitygw for files
// it did not write itself).
func (o *Object) ETag() string { return o.val.etag }

// LastModified returns the Last-Modified header of Open's answer ("" if
// none).
func (o *Object) LastModified() string { return o.val.lastModified }

// Location returns the parsed name.
func (o *Object) Location() Location { return o.loc }

// Release drops one reference. The Object holds no OS resource, so this
// only lets the Source drop the kept head bytes; a Release without a
// matching Open panics, like files.File.Release, since it is a caller bug.
func (o *Object) Release() {
	if o.refs.Add(-1) < 0 {
		panic("remote: Release without a matching Open on " + o.loc.String())
	}
}

// headBytes returns the kept first bytes (nil if none or dropped).
func (o *Object) headBytes() []byte {
	if p := o.head.Load(); p != nil {
		return *p
	}
	return nil
}

// versionOf hashes (address, validator) with FNV-1a 64; 0 becomes 1, since
// 0 means "no version" to the engine.
func versionOf(addr string, v validator) uint64 {
	h := fnv.New64a()
	h.Write([]byte(addr))
	h.Write([]byte{0})
	if v.etag != "" {
		h.Write([]byte("etag:" + v.etag))
	} else {
		h.Write([]byte("lm:" + v.lastModified))
	}
	var sz [8]byte
	for i := range sz {
		sz[i] = byte(v.size >> (8 * i))
	}
	h.Write(sz[:])
	if s := h.Sum64(); s != 0 {
		return s
	}
	return 1
}

// versionAddr is the address hashed into a version: the endpoint-qualified
// s3 name, or the HTTP URL without query parameters named X-Amz-* (a
// presigned URL is re-signed with new ones for the same object).
func (c *Client) versionAddr(loc Location) string {
	if loc.Kind == KindS3 {
		return c.endpoint.String() + "/" + loc.Bucket + "/" + loc.Key
	}
	u := *loc.URL
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if len(k) >= 6 && strings.EqualFold(k[:6], "x-amz-") {
				delete(q, k)
			}
		}
		u.RawQuery = q.Encode()
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery}).String()
}
