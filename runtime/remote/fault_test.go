package remote

import (
	"bytes"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/source"
)

// objSize spans three 5 MiB parts after Open's 64 KiB head window, the last
// one short and odd.
const objSize = 2*MinPartBytes + 3<<20 + 12345

// openAndRead opens url through a new Source on c and reads [off, off+n).
func openAndRead(t *testing.T, c *Client, url string, off, n uint64) ([]byte, error) {
	t.Helper()
	src := NewSource(c)
	o, _, err := src.Open(url, files.TrustNone)
	if err != nil {
		return nil, err
	}
	defer o.Release()
	dst := make([]byte, n)
	path, err := src.ReadAt(o, dst, off, source.PathDirect)
	if err == nil && path != source.PathBuffered {
		t.Errorf("ReadAt path = %d, want PathBuffered", path)
	}
	return dst, err
}

// wantErr checks err's status and message substrings.
func wantErr(t *testing.T, err error, code errs.Code, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want %v", code)
	}
	if got := errs.CodeOf(err); got != code {
		t.Errorf("code = %v, want %v (%v)", got, code, err)
	}
	mustContain(t, err.Error(), subs...)
}

// onRange makes fault answer the first `times` requests whose Range starts
// at `first` with do.
func onRange(first string, times int, do func(w http.ResponseWriter, r *http.Request)) func(http.ResponseWriter, *http.Request, int) bool {
	var mu sync.Mutex
	left := times
	return func(w http.ResponseWriter, r *http.Request, n int) bool {
		if !strings.HasPrefix(r.Header.Get("Range"), "bytes="+first+"-") {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if left == 0 {
			return false
		}
		left--
		do(w, r)
		return true
	}
}

const secondPart = "5308416" // 64 KiB + 5 MiB: where the second ranged part starts

func TestFault_SlowDownRetriedAndThrottles(t *testing.T) {
	data := pattern(objSize, 1)
	s := newRangeServer(t, data)
	s.fault = onRange(secondPart, 2, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "0")
		xmlError(w, 503, "SlowDown", "Please reduce your request rate.")
	})
	o := fastOptions()
	o.MaxConcurrency = 4
	c := newClient(t, o)
	got, err := openAndRead(t, c, s.URL+"/obj", 0, objSize)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("bytes differ")
	}
	st := c.Stats()
	// 1 open + 3 parts + 2 retries.
	if st.Requests != 6 || st.Retries != 2 || st.Throttles != 2 || st.Failures != 0 || s.requests() != 6 {
		t.Errorf("stats = %+v, server requests %d; want 6 requests, 2 retries, 2 throttles", st, s.requests())
	}
	if st.Bytes != objSize {
		t.Errorf("Bytes = %d, want %d", st.Bytes, objSize)
	}
}

func TestFault_TooManyRequestsGivesUp(t *testing.T) {
	data := pattern(objSize, 2)
	s := newRangeServer(t, data)
	s.fault = onRange(secondPart, 100, func(w http.ResponseWriter, r *http.Request) {
		xmlError(w, 429, "TooManyRequests", "Rate exceeded")
	})
	o := fastOptions()
	o.MaxAttempts = 3
	o.MaxConcurrency = 1 // the parts after the failing one are never sent
	c := newClient(t, o)
	_, err := openAndRead(t, c, s.URL+"/obj", 0, objSize)
	wantErr(t, err, errs.IO, "remote read "+s.URL+"/obj at offset 5308416",
		"bytes [5308416, 10551296): HTTP 429 TooManyRequests: Rate exceeded", "gave up after 3 attempts")
	st := c.Stats()
	// open, part 1, then part 2 three times; part 3 never starts.
	if st.Requests != 5 || st.Retries != 2 || st.Throttles != 3 || st.Failures != 1 {
		t.Errorf("stats = %+v; want 5 requests, 2 retries, 3 throttles, 1 failure", st)
	}
}

func TestFault_RetryBudgetBoundsTime(t *testing.T) {
	s := newRangeServer(t, pattern(objSize, 3))
	s.fault = onRange(secondPart, 1000, func(w http.ResponseWriter, r *http.Request) {
		xmlError(w, 500, "InternalError", "We encountered an internal error. Please try again.")
	})
	o := fastOptions()
	o.MaxAttempts = 100
	o.BackoffBase, o.BackoffMax = 20*time.Millisecond, 20*time.Millisecond
	o.RetryBudget = 100 * time.Millisecond
	o.MaxConcurrency = 1
	c := newClient(t, o)
	start := time.Now()
	_, err := openAndRead(t, c, s.URL+"/obj", 0, objSize)
	wantErr(t, err, errs.IO, "HTTP 500 InternalError: We encountered an internal error.", "gave up after")
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("took %v with a 100ms budget", el)
	}
	// Full jitter waits 0 to 20 ms, so a 100 ms budget allows a few to a
	// few dozen retries, never the 99 MaxAttempts would.
	if r := c.Stats().Retries; r < 1 || r >= 99 {
		t.Errorf("retries = %d, want 1 to 98 within a 100 ms budget", r)
	}
}

func TestFault_StalledBodyResumes(t *testing.T) {
	data := pattern(objSize, 4)
	s := newRangeServer(t, data)
	s.fault = onRange(secondPart, 1, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Content-Range", "bytes 5308416-10551295/"+itoa(objSize))
		w.Header().Set("Content-Length", itoa(MinPartBytes))
		w.WriteHeader(206)
		w.Write(data[5308416 : 5308416+1000])
		w.(http.Flusher).Flush()
		<-r.Context().Done() // stall until the client gives up on us
	})
	o := fastOptions()
	o.StallTimeout = 100 * time.Millisecond
	o.MaxConcurrency = 1
	c := newClient(t, o)
	got, err := openAndRead(t, c, s.URL+"/obj", 0, objSize)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("bytes differ")
	}
	if st := c.Stats(); st.Retries != 1 || st.Requests != 5 {
		t.Errorf("stats = %+v; want 1 retry, 5 requests", st)
	}
	// The retry asks only for what the stalled attempt did not deliver.
	want := []string{"bytes=0-65535", "bytes=65536-5308415", "bytes=5308416-10551295", "bytes=5309416-10551295", "bytes=10551296-" + itoa(objSize-1)}
	if got := s.rangesSeen(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("ranges = %q, want %q", got, want)
	}
}

func TestFault_StallAtEveryAttemptIsIO(t *testing.T) {
	s := newRangeServer(t, pattern(objSize, 5))
	s.fault = onRange(secondPart, 100, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // no headers at all
	})
	o := fastOptions()
	o.HeaderTimeout = 50 * time.Millisecond
	o.MaxAttempts = 2
	o.MaxConcurrency = 1
	c := newClient(t, o)
	_, err := openAndRead(t, c, s.URL+"/obj", 0, objSize)
	wantErr(t, err, errs.IO, "bytes [5308416, 10551296): no response headers within 50ms", "gave up after 2 attempts")
}

func TestFault_TruncatedBodyResumes(t *testing.T) {
	data := pattern(objSize, 6)
	s := newRangeServer(t, data)
	var cuts int
	s.fault = func(w http.ResponseWriter, r *http.Request, n int) bool {
		f, l, _ := parseRangeHeader(r.Header.Get("Range"))
		if f < 5308416 || f >= 10551296 || cuts == 2 {
			return false
		}
		cuts++
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Content-Range", "bytes "+itoa(f)+"-"+itoa(l)+"/"+itoa(objSize))
		w.Header().Set("Content-Length", itoa(l-f+1))
		w.WriteHeader(206)
		// Fewer bytes than Content-Length: net/http closes the connection.
		w.Write(data[f : f+777])
		return true
	}
	o := fastOptions()
	o.MaxConcurrency = 1
	c := newClient(t, o)
	got, err := openAndRead(t, c, s.URL+"/obj", 0, objSize)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("bytes differ")
	}
	if st := c.Stats(); st.Retries != 2 {
		t.Errorf("retries = %d, want 2", st.Retries)
	}
	// Each retry resumes after the 777 bytes the cut attempt delivered.
	rs := s.rangesSeen()
	if len(rs) != 6 || rs[2] != "bytes=5308416-10551295" || rs[3] != "bytes=5309193-10551295" || rs[4] != "bytes=5309970-10551295" {
		t.Errorf("ranges = %q", rs)
	}
}

func TestFault_ShortBodyEveryTimeNamesIt(t *testing.T) {
	data := pattern(objSize, 7)
	s := newRangeServer(t, data)
	s.fault = func(w http.ResponseWriter, r *http.Request, n int) bool {
		f, l, _ := parseRangeHeader(r.Header.Get("Range"))
		if f < 5308416 || f >= 10551296 {
			return false
		}
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Content-Range", "bytes "+itoa(f)+"-"+itoa(l)+"/"+itoa(objSize))
		w.Header().Set("Content-Length", itoa(l-f+1))
		w.WriteHeader(206)
		w.Write(data[f : f+10])
		return true
	}
	o := fastOptions()
	o.MaxAttempts = 3
	o.MaxConcurrency = 1
	c := newClient(t, o)
	_, err := openAndRead(t, c, s.URL+"/obj", 0, objSize)
	wantErr(t, err, errs.IO, "bytes [5308416, 10551296): HTTP 206", "gave up after 3 attempts")
	// The third attempt resumed after 2 x 10 bytes.
	mustContain(t, err.Error(), "(short body: 10 of 5242860 bytes)")
}

// resetMidBody answers with headers and 1000 body bytes, then resets the
// connection (SO_LINGER 0 makes close send RST: the client sees
// ECONNRESET). A reset before any answer is retried by net/http's
// Transport itself on a reused connection, so the test resets after bytes.
func resetMidBody(data []byte) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		f, l, _ := parseRangeHeader(r.Header.Get("Range"))
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		buf.WriteString("HTTP/1.1 206 Partial Content\r\nETag: \"v1\"\r\nContent-Range: bytes " + itoa(f) + "-" + itoa(l) + "/" + itoa(len(data)) +
			"\r\nContent-Length: " + itoa(l-f+1) + "\r\n\r\n")
		buf.Write(data[f : f+1000])
		buf.Flush()
		time.Sleep(10 * time.Millisecond) // let the bytes leave before the RST
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}
}

func TestFault_ConnectionResetRetried(t *testing.T) {
	data := pattern(objSize, 8)
	s := newRangeServer(t, data)
	s.fault = onRange(secondPart, 1, resetMidBody(data))
	o := fastOptions()
	o.MaxConcurrency = 1
	c := newClient(t, o)
	got, err := openAndRead(t, c, s.URL+"/obj", 0, objSize)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("bytes differ")
	}
	if st := c.Stats(); st.Retries != 1 || st.Requests != 5 {
		t.Errorf("stats = %+v; want 1 retry, 5 requests", st)
	}
	if rs := s.rangesSeen(); len(rs) != 5 || rs[3] != "bytes=5309416-10551295" {
		t.Errorf("ranges = %q, want the retry to resume at 5309416", rs)
	}
}

func TestFault_ResetEveryTimeIsIO(t *testing.T) {
	data := pattern(objSize, 9)
	s := newRangeServer(t, data)
	s.fault = func(w http.ResponseWriter, r *http.Request, n int) bool {
		if f, _, _ := parseRangeHeader(r.Header.Get("Range")); f < 5308416 || f >= 10551296 {
			return false
		}
		resetMidBody(data)(w, r)
		return true
	}
	o := fastOptions()
	o.MaxAttempts = 2
	o.MaxConcurrency = 1
	c := newClient(t, o)
	_, err := openAndRead(t, c, s.URL+"/obj", 0, objSize)
	wantErr(t, err, errs.IO, "bytes [5308416, 10551296): HTTP 206 (", "connection reset by peer after 1000 of 5241880 bytes", "gave up after 2 attempts")
}

func TestFault_200InsteadOf206(t *testing.T) {
	data := pattern(objSize, 10)
	s := newRangeServer(t, data)
	s.fault = onRange(secondPart, 100, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		w.Write(data) // the whole object, as a server without range support answers
	})
	o := fastOptions()
	o.MaxConcurrency = 1
	c := newClient(t, o)
	_, err := openAndRead(t, c, s.URL+"/obj", 0, objSize)
	wantErr(t, err, errs.IO, "bytes [5308416, 10551296): HTTP 200 (the server ignored the Range header (HTTP 200 for bytes=5308416-10551295))")
	if st := c.Stats(); st.Retries != 0 || st.Requests != 3 {
		t.Errorf("stats = %+v; want no retry (a server that ignores Range keeps ignoring it)", st)
	}
}

func TestFault_200AtOpen(t *testing.T) {
	s := newRangeServer(t, pattern(1000, 11))
	s.fault = func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.Write(pattern(1000, 11))
		return true
	}
	c := newClient(t, fastOptions())
	_, _, err := NewSource(c).Open(s.URL+"/small", files.TrustNone)
	wantErr(t, err, errs.IO, "remote open "+s.URL+"/small at offset 0: bytes [0, 65536): HTTP 200 (the server ignored the Range header")
}

func TestFault_WrongContentRange(t *testing.T) {
	data := pattern(objSize, 12)
	for _, tc := range []struct{ name, cr, want string }{
		{"shifted", "bytes 5308417-10551296/" + itoa(objSize), `Content-Range "bytes 5308417-10551296/` + itoa(objSize) + `" does not match the requested bytes=5308416-10551295`},
		{"shorter", "bytes 5308416-5308500/" + itoa(objSize), `does not match the requested bytes=5308416-10551295`},
		{"garbage", "bytes five-six/seven", `Content-Range "bytes five-six/seven" is not bytes first-last/size`},
		{"missing", "", `Content-Range "" is not bytes first-last/size`},
		{"other size", "bytes 5308416-10551295/99999999", `changed since open: size ` + itoa(objSize) + ` became 99999999`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRangeServer(t, data)
			s.fault = onRange(secondPart, 100, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("ETag", `"v1"`)
				if tc.cr != "" {
					w.Header().Set("Content-Range", tc.cr)
				}
				w.WriteHeader(206)
				w.Write(data[5308416:10551296])
			})
			o := fastOptions()
			o.MaxConcurrency = 1
			c := newClient(t, o)
			_, err := openAndRead(t, c, s.URL+"/obj", 0, objSize)
			wantErr(t, err, errs.IO, "bytes [5308416, 10551296): HTTP 206 (", tc.want)
			if r := c.Stats().Retries; r != 0 {
				t.Errorf("retries = %d, want 0", r)
			}
		})
	}
}

func TestFault_ETagChangeMidRead(t *testing.T) {
	v1, v2 := pattern(objSize, 13), pattern(objSize, 14)
	t.Run("If-Match refused", func(t *testing.T) {
		s := newRangeServer(t, v1)
		s.fault = func(w http.ResponseWriter, r *http.Request, n int) bool {
			if n == 3 { // after the open and the first part: overwrite
				s.set(v2, `"v2"`)
			}
			return false
		}
		o := fastOptions()
		o.MaxConcurrency = 1
		c := newClient(t, o)
		_, err := openAndRead(t, c, s.URL+"/obj", 0, objSize)
		wantErr(t, err, errs.IO, "bytes [5308416, 10551296): HTTP 412 PreconditionFailed: At least one of the pre-conditions",
			`changed since open: the server refused If-Match "v1"`)
		if r := c.Stats().Retries; r != 0 {
			t.Errorf("retries = %d, want 0", r)
		}
	})
	t.Run("If-Match ignored", func(t *testing.T) {
		s := newRangeServer(t, v1)
		s.fault = func(w http.ResponseWriter, r *http.Request, n int) bool {
			if n == 3 {
				s.set(v2, `"v2"`)
			}
			r.Header.Del("If-Match") // a server that does not implement it
			s.serve(w, r)
			return true
		}
		o := fastOptions()
		o.MaxConcurrency = 1
		c := newClient(t, o)
		_, err := openAndRead(t, c, s.URL+"/obj", 0, objSize)
		wantErr(t, err, errs.IO, `bytes [5308416, 10551296): HTTP 206 (changed since open: ETag "v1" became "v2")`)
	})
}

func TestFault_ErrorCodesMap(t *testing.T) {
	for _, tc := range []struct {
		status     int
		code, msg  string
		want       errs.Code
		wantInText string
	}{
		{404, "NoSuchKey", "The specified key does not exist.", errs.NotFound, "HTTP 404 NoSuchKey: The specified key does not exist."},
		{404, "NoSuchBucket", "The specified bucket does not exist.", errs.NotFound, "HTTP 404 NoSuchBucket"},
		{403, "AccessDenied", "Access Denied.", errs.Permission, "HTTP 403 AccessDenied: Access Denied."},
		{403, "SignatureDoesNotMatch", "The request signature we calculated does not match", errs.Permission, "HTTP 403 SignatureDoesNotMatch"},
		{404, "XAdminUserNotFound", "User not found", errs.Permission, "HTTP 404 XAdminUserNotFound: User not found"},
		{400, "ExpiredToken", "The provided token has expired.", errs.Permission, "HTTP 400 ExpiredToken"},
		{400, "InvalidArgument", "Bad &amp; wrong &lt;x&gt;", errs.IO, "HTTP 400 InvalidArgument: Bad & wrong <x>"},
		{501, "NotImplemented", "A header you provided implies functionality that is not implemented", errs.IO, "HTTP 501 NotImplemented"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			s := newRangeServer(t, nil)
			s.fault = func(w http.ResponseWriter, r *http.Request, n int) bool {
				xmlError(w, tc.status, tc.code, tc.msg)
				return true
			}
			c := newClient(t, fastOptions())
			_, _, err := NewSource(c).Open(s.URL+"/k?X-Amz-Signature=deadbeef", files.TrustNone)
			wantErr(t, err, tc.want, "remote open "+s.URL+"/k?... at offset 0: bytes [0, 65536): "+tc.wantInText)
			if strings.Contains(err.Error(), "deadbeef") {
				t.Errorf("presigned query in message: %v", err)
			}
			if s.requests() != 1 {
				t.Errorf("requests = %d, want 1 (not retryable)", s.requests())
			}
		})
	}
}

func TestFault_EmptyObject(t *testing.T) {
	s := newRangeServer(t, []byte{})
	c := newClient(t, fastOptions())
	src := NewSource(c)
	o, _, err := src.Open(s.URL+"/empty", files.TrustNone)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release()
	if o.Size() != 0 || o.Version() == 0 {
		t.Errorf("size %d version %d, want 0 and nonzero", o.Size(), o.Version())
	}
	if _, err := src.ReadAt(o, nil, 0, source.PathBuffered); err != nil {
		t.Errorf("empty read: %v", err)
	}
	_, err = src.ReadAt(o, make([]byte, 1), 0, source.PathBuffered)
	wantErr(t, err, errs.EOF, "range [0, 1) is past the end of the object (0 bytes)")
}
