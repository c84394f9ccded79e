package diskcache

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Key names one version of one object in the cache.
type Key struct {
	// ID identifies the object: remote.Client.Address (s3: endpoint, bucket
	// and key; http(s): the URL without X-Amz-* query parameters). It may
	// hold a query; only its hash and its display form reach the disk.
	ID string
	// Validator binds the bytes: "etag:" and the ETag as the server sent
	// it, else "lm:" and the Last-Modified header.
	Validator string
	// Size is the object's size in bytes at this version.
	Size uint64

	display string // ID with its query replaced by a hash of it (stored in headers)
	idHash  string // 32 hex digits of SHA-256(ID): file names start with it
	verHash string // 16 hex digits of SHA-256(Validator, Size)
}

// NewKey returns the Key of the object id at validator with size bytes.
// Errors: an empty id or validator, or texts too long to store (over
// 32 KiB together), which a caller treats as "not cacheable".
func NewKey(id, validator string, size uint64) (Key, error) {
	k := Key{ID: id, Validator: validator, Size: size, display: displayID(id)}
	if id == "" || validator == "" {
		return k, fmt.Errorf("diskcache: an object without identity or validator is not cacheable")
	}
	if len(k.display)+len(validator) > maxTextBytes {
		return k, fmt.Errorf("diskcache: identity and validator of %d bytes exceed %d", len(k.display)+len(validator), maxTextBytes)
	}
	h := sha256.Sum256([]byte(id))
	k.idHash = hex.EncodeToString(h[:16])
	v := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d", validator, size)))
	k.verHash = hex.EncodeToString(v[:8])
	return k, nil
}

// displayID is id fit to store in the clear: a query (which may be a
// presigned signature of a store other than S3) becomes "?sha256=" and 16
// hex digits of its hash, so two queries still give two identities.
func displayID(id string) string {
	i := strings.IndexByte(id, '?')
	if i < 0 {
		return id
	}
	h := sha256.Sum256([]byte(id[i+1:]))
	return id[:i] + "?sha256=" + hex.EncodeToString(h[:8])
}

// fileName is the entry file of block idx of k: id hash, version hash and
// block index, so every name is fixed length, holds no part of the URL,
// and the entries of one object (any version) share a prefix.
func (k *Key) fileName(idx uint64) string {
	return fmt.Sprintf("%s-%s-%08x%s", k.idHash, k.verHash, idx, entrySuffix)
}
