package remote

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/memtier/memtier/runtime/errs"
)

// Server error codes by status they map to (S3's documented codes:
// https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html).
var (
	notFoundCodes   = map[string]bool{"NoSuchKey": true, "NoSuchBucket": true, "NotFound": true, "NoSuchVersion": true}
	permissionCodes = map[string]bool{
		"AccessDenied": true, "SignatureDoesNotMatch": true, "InvalidAccessKeyId": true,
		"ExpiredToken": true, "InvalidToken": true, "TokenRefreshRequired": true,
		"RequestTimeTooSkewed": true, "AllAccessDisabled": true, "AccountProblem": true,
		// versitygw's answer to an unknown access key ID, with HTTP 404: a
		// credential problem, not a missing object.
		"XAdminUserNotFound": true,
	}
)

// codeFor maps a failed attempt to a status: errs.NotFound for 404 and
// NoSuchKey/NoSuchBucket, errs.Permission for 401/403 and the credential
// codes (whatever their HTTP status), errs.EOF for 416 (a range the object no longer holds), errs.IO for
// everything else (network failures, 5xx after retries, a changed object,
// a server that broke the range protocol).
func codeFor(ae *attemptError) errs.Code {
	switch {
	case ae.canceled:
		return errs.Interrupted
	case ae.changed:
		return errs.IO
	case notFoundCodes[ae.code]:
		return errs.NotFound
	case permissionCodes[ae.code]: // before the status: some come with 404
		return errs.Permission
	case ae.status == http.StatusNotFound:
		return errs.NotFound
	case ae.status == http.StatusForbidden || ae.status == http.StatusUnauthorized:
		return errs.Permission
	case ae.status == http.StatusRequestedRangeNotSatisfiable:
		return errs.EOF
	}
	return errs.IO
}

// fail builds the error of a part or Open that gave up: the operation, the
// object, the byte offset and a message naming the part's range, the HTTP
// status, the server's code and message, what went wrong and how many
// attempts were made, e.g.
//
//	remote read s3://b/k at offset 8388608: bytes [8388608, 16777216):
//	HTTP 503 SlowDown: Please reduce your request rate. (gave up after 6 attempts in 2.1s)
//
// Secrets (the secret key, the session token) are scrubbed from it, and the
// object is named by Location.String (no presigned query).
func (c *Client) fail(op string, loc Location, first, last uint64, ae *attemptError, attempts int, elapsed time.Duration) error {
	var b strings.Builder
	fmt.Fprintf(&b, "bytes [%d, %d)", first, last+1)
	if ae.status != 0 {
		fmt.Fprintf(&b, ": HTTP %d", ae.status)
		if ae.code != "" {
			b.WriteString(" " + ae.code)
		}
		if ae.message != "" {
			b.WriteString(": " + ae.message)
		}
	}
	if ae.reason != "" {
		if ae.status != 0 {
			b.WriteString(" (" + ae.reason + ")")
		} else {
			b.WriteString(": " + ae.reason)
		}
	}
	if attempts > 1 {
		fmt.Fprintf(&b, " (gave up after %d attempts in %v)", attempts, elapsed.Round(time.Millisecond))
	}
	code := codeFor(ae)
	if code == errs.Permission && loc.Kind == KindS3 && c.res.origin != "" {
		fmt.Fprintf(&b, " (credentials from %s)", c.res.origin)
	}
	return errs.At(code, op, loc.String(), int64(first), "%s", c.res.scrub(b.String()))
}
