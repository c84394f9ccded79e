package remote

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// validator identifies one version of an object: what later GETs are
// pinned to (If-Match on a strong ETag) and what every answer is checked
// against (ETag, else Last-Modified, and size).
type validator struct {
	etag         string // as the server sent it, quotes included; "" if none
	lastModified string // HTTP date as sent; "" if none
	size         uint64
}

// strongETag reports whether v's ETag can be used with If-Match (RFC 9110:
// If-Match compares strongly, so a weak W/"..." tag never matches).
func (v *validator) strongETag() bool { return v.etag != "" && !strings.HasPrefix(v.etag, "W/") }

// getSpec is one ranged GET: bytes [first, last] of loc into dst
// (len last-first+1). open marks Open's GET, whose range may run past the
// end of the object (the server trims it) and which learns the validator;
// every other GET is pinned to pin. ifNoneMatch/ifModifiedSince make a
// revalidation, answered 304 when unchanged.
type getSpec struct {
	loc             Location
	first, last     uint64
	dst             []byte
	open            bool
	pin             *validator
	ifNoneMatch     string
	ifModifiedSince string
}

// getResult is what one successful attempt learnt.
type getResult struct {
	val         validator
	n           int  // bytes written into dst
	notModified bool // 304 to a revalidation
	empty       bool // Open of a 0-byte object (416, or 200 with no body)
}

// attemptError is one failed attempt, classified for the retry loop and
// described for the final message.
type attemptError struct {
	status     int    // HTTP status, 0 when no response came
	code       string // the server's <Code>, "" if none
	message    string // the server's <Message>, "" if none
	reason     string // what MemTier saw ("connection reset", "short body: ...")
	retry      bool   // worth another attempt
	throttle   bool   // 503 or 429: lower the concurrency
	changed    bool   // the object is not the version pinned (412, another ETag)
	canceled   bool   // the request's context ended (Client.Interrupt): errs.Interrupted
	retryAfter time.Duration
	n          int // bytes written into dst before the failure (resumable)
}

// retryable HTTP statuses: S3's documented transient errors (500
// InternalError, 503 SlowDown / ServiceUnavailable), gateway errors and
// 429 from S3-compatible servers and proxies; 408 is a server-side timeout.
func retryableStatus(s int) bool {
	switch s {
	case 408, 429, 500, 502, 503, 504:
		return true
	}
	return false
}

// getOnce runs one attempt of sp. A timer cancels the attempt when no
// headers come within HeaderTimeout or no body bytes within StallTimeout,
// for any Transport.
func (c *Client) getOnce(ctx context.Context, sp *getSpec) (getResult, *attemptError) {
	var res getResult
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stalled atomic.Bool
	wait := c.opts.HeaderTimeout
	timer := time.AfterFunc(wait, func() { stalled.Store(true); cancel() })
	defer timer.Stop()

	req, err := c.newGet(actx, sp.loc, sp.first, sp.last, conditions(sp))
	if err != nil {
		return res, &attemptError{reason: err.Error()}
	}
	c.st.requests.Add(1)
	resp, err := c.hc.Do(req)
	if err != nil {
		ae := &attemptError{retry: true}
		switch {
		case ctx.Err() != nil:
			ae.retry, ae.reason, ae.canceled = false, "interrupted", true
		case stalled.Load():
			ae.reason = "no response headers within " + wait.String()
		default:
			ae.reason = transportReason(err)
		}
		return res, ae
	}
	defer resp.Body.Close()
	wait = c.opts.StallTimeout
	timer.Reset(wait)

	if resp.StatusCode != http.StatusPartialContent {
		return c.notPartial(sp, resp)
	}
	want := uint64(len(sp.dst))
	cr, ok := parseContentRange(resp.Header.Get("Content-Range"))
	switch {
	case !ok || cr.unsatisfied || !cr.sizeKnown:
		return res, &attemptError{status: resp.StatusCode,
			reason: "Content-Range " + strconv.Quote(resp.Header.Get("Content-Range")) + " is not bytes first-last/size"}
	case sp.open:
		// The server trims a range past the end: 0-(OpenBytes-1) of a
		// smaller object comes back as 0-(size-1).
		if cr.first != sp.first || cr.last != min(sp.last, cr.size-1) {
			return res, rangeMismatch(resp, sp)
		}
		want = cr.last - cr.first + 1
	case cr.first != sp.first || cr.last != sp.last:
		return res, rangeMismatch(resp, sp)
	}
	res.val = validator{etag: resp.Header.Get("ETag"), lastModified: resp.Header.Get("Last-Modified"), size: cr.size}
	if p := sp.pin; p != nil {
		if ae := p.check(&res.val, resp.StatusCode); ae != nil {
			return res, ae
		}
	}
	if resp.ContentLength >= 0 && uint64(resp.ContentLength) != want {
		return res, &attemptError{status: resp.StatusCode,
			reason: "Content-Length " + strconv.FormatInt(resp.ContentLength, 10) + " does not match Content-Range " + strconv.Quote(cr.String())}
	}

	// Read straight into the caller's memory; every chunk re-arms the stall
	// timer.
	dst := sp.dst[:want]
	n := 0
	for n < len(dst) {
		m, rerr := resp.Body.Read(dst[n:])
		n += m
		if m > 0 {
			timer.Reset(wait)
		}
		if rerr != nil {
			if n == len(dst) && rerr == io.EOF {
				break
			}
			c.st.bytes.Add(uint64(n))
			ae := &attemptError{status: resp.StatusCode, retry: true, n: n}
			switch {
			case ctx.Err() != nil:
				ae.retry, ae.reason, ae.canceled = false, "interrupted", true
			case stalled.Load():
				ae.reason = "body stalled: no bytes for " + wait.String() + " after " + strconv.Itoa(n) + " of " + strconv.Itoa(len(dst))
			case rerr == io.EOF || errors.Is(rerr, io.ErrUnexpectedEOF):
				ae.reason = "short body: " + strconv.Itoa(n) + " of " + strconv.Itoa(len(dst)) + " bytes"
			default:
				ae.reason = transportReason(rerr) + " after " + strconv.Itoa(n) + " of " + strconv.Itoa(len(dst)) + " bytes"
			}
			return res, ae
		}
	}
	c.st.bytes.Add(uint64(n))
	res.n = n
	// The body must end here: more bytes than Content-Range announced mean
	// the answer is not what it says (and they would be mixed in).
	var extra [1]byte
	if m, _ := resp.Body.Read(extra[:]); m > 0 {
		return res, &attemptError{status: resp.StatusCode, reason: "body longer than Content-Range " + strconv.Quote(cr.String())}
	}
	return res, nil
}

// conditions returns sp's conditional headers. A pin without a strong
// ETag sends no If-Unmodified-Since: versitygw v1.8.0 compares it with the
// file's sub-second mtime, so an unmodified object whose mtime is not a
// whole second fails with 412 (measured; RFC 9110 section 13.1.4 compares
// at the date's 1 s resolution). Such pins rely on validator.check of every
// answer's Last-Modified and size instead.
func conditions(sp *getSpec) http.Header {
	h := http.Header{}
	if p := sp.pin; p != nil && p.strongETag() {
		h.Set("If-Match", p.etag)
	}
	if sp.ifNoneMatch != "" {
		h.Set("If-None-Match", sp.ifNoneMatch)
	} else if sp.ifModifiedSince != "" {
		h.Set("If-Modified-Since", sp.ifModifiedSince)
	}
	return h
}

// check compares an answer's validator with the pinned one. A server that
// ignored If-Match (or one without ETags, pinned by date) is caught here:
// another ETag, Last-Modified or size is the object changed.
func (p *validator) check(got *validator, status int) *attemptError {
	var why string
	switch {
	case got.size != p.size:
		why = "size " + strconv.FormatUint(p.size, 10) + " became " + strconv.FormatUint(got.size, 10)
	case p.etag != "" && got.etag != "" && got.etag != p.etag:
		why = "ETag " + p.etag + " became " + got.etag
	case p.etag == "" && p.lastModified != "" && got.lastModified != "" && got.lastModified != p.lastModified:
		why = "Last-Modified " + p.lastModified + " became " + got.lastModified
	default:
		return nil
	}
	return &attemptError{status: status, changed: true, reason: "changed since open: " + why}
}

func rangeMismatch(resp *http.Response, sp *getSpec) *attemptError {
	return &attemptError{status: resp.StatusCode,
		reason: "Content-Range " + strconv.Quote(resp.Header.Get("Content-Range")) +
			" does not match the requested bytes=" + strconv.FormatUint(sp.first, 10) + "-" + strconv.FormatUint(sp.last, 10)}
}

// notPartial handles every answer but 206: an empty object at Open, 304 to
// a revalidation, and the errors, with the server's XML Code and Message.
func (c *Client) notPartial(sp *getSpec, resp *http.Response) (getResult, *attemptError) {
	var res getResult
	st := resp.StatusCode
	switch {
	case st == http.StatusNotModified && (sp.ifNoneMatch != "" || sp.ifModifiedSince != ""):
		res.notModified = true
		return res, nil
	case st == http.StatusOK && sp.open && resp.ContentLength == 0:
		// A server may answer a range of an empty object with the whole
		// (empty) object: no bytes to mix up.
		res.empty = true
		res.val = validator{etag: resp.Header.Get("ETag"), lastModified: resp.Header.Get("Last-Modified")}
		return res, nil
	case st == http.StatusRequestedRangeNotSatisfiable && sp.open:
		// bytes=0-N is unsatisfiable only for an empty object (S3 and
		// versitygw answer 416 InvalidRange, with or without "*/0").
		if cr, ok := parseContentRange(resp.Header.Get("Content-Range")); ok && cr.sizeKnown && cr.size != 0 {
			return res, &attemptError{status: st, reason: "416 for bytes=0-" + strconv.FormatUint(sp.last, 10) + " with Content-Range " + strconv.Quote(cr.String())}
		}
		res.empty = true
		res.val = validator{etag: resp.Header.Get("ETag"), lastModified: resp.Header.Get("Last-Modified")}
		return res, nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	ae := &attemptError{status: st}
	ae.code, ae.message = parseXMLError(body)
	ae.code, ae.message = c.res.scrub(ae.code), c.res.scrub(ae.message)
	switch {
	case st == http.StatusOK:
		ae.reason = "the server ignored the Range header (HTTP 200 for bytes=" +
			strconv.FormatUint(sp.first, 10) + "-" + strconv.FormatUint(sp.last, 10) + ")"
	case st >= 300 && st < 400 && st != http.StatusNotModified:
		// Followed, a redirect would drop the signature or leave the
		// endpoint; say so, and where it pointed.
		ae.reason = "redirects are not followed; read the object at its final URL"
		if loc := resp.Header.Get("Location"); loc != "" {
			ae.reason += " (Location: " + Redact(loc) + ")"
		}
	case st == http.StatusPreconditionFailed:
		ae.changed = true
		ae.reason = "changed since open: the server refused " + describePin(sp.pin)
	case retryableStatus(st):
		ae.retry = true
		ae.throttle = st == http.StatusServiceUnavailable || st == http.StatusTooManyRequests
		ae.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return res, ae
}

func describePin(p *validator) string {
	switch {
	case p == nil:
		return "a precondition"
	default:
		return "If-Match " + p.etag
	}
}

// parseRetryAfter reads Retry-After as seconds or an HTTP date (0 when
// absent or malformed; capped at an hour).
func parseRetryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.ParseUint(strings.TrimSpace(h), 10, 32); err == nil {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), time.Hour)
}

// transportReason describes a transport error without the request URL
// (url.Error repeats it, query and all: a presigned URL's signature).
func transportReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}
