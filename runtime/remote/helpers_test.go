package remote

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/remote/s3test"
)

// pattern returns n bytes of test data that vary with the offset and seed.
var pattern = s3test.Pattern

// testEnv is an environment for Options.Getenv: only what a test sets.
func testEnv(kv ...string) func(string) string {
	m := map[string]string{"HOME": "/nonexistent-home-for-tests"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// fastOptions are Options with millisecond backoff and timeouts, the
// smallest parts, and an empty environment.
func fastOptions() Options {
	return Options{
		PartBytes:     MinPartBytes,
		BackoffBase:   time.Millisecond,
		BackoffMax:    4 * time.Millisecond,
		HeaderTimeout: 2 * time.Second,
		StallTimeout:  2 * time.Second,
		Getenv:        testEnv(),
	}
}

func newClient(t *testing.T, o Options) *Client {
	t.Helper()
	c, err := NewClient(o)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// rangeServer serves one object with ranged GETs the way S3 does (206 and
// Content-Range, ETag, If-Match -> 412, If-None-Match -> 304, 416 past
// the end), with an optional fault hook run first. It records every
// request's Range header.
type rangeServer struct {
	*httptest.Server
	mu     sync.Mutex
	data   []byte
	etag   string
	ranges []string
	n      atomic.Int64
	// fault runs for request number n (from 1) before the object is served;
	// it returns true when it answered.
	fault func(w http.ResponseWriter, r *http.Request, n int) bool
}

func newRangeServer(t *testing.T, data []byte) *rangeServer {
	s := &rangeServer{data: data, etag: `"v1"`}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.Close)
	return s
}

func (s *rangeServer) set(data []byte, etag string) {
	s.mu.Lock()
	s.data, s.etag = data, etag
	s.mu.Unlock()
}

func (s *rangeServer) requests() int { return int(s.n.Load()) }

func (s *rangeServer) rangesSeen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ranges...)
}

func (s *rangeServer) handle(w http.ResponseWriter, r *http.Request) {
	n := int(s.n.Add(1))
	s.mu.Lock()
	s.ranges = append(s.ranges, r.Header.Get("Range"))
	fault := s.fault
	s.mu.Unlock()
	if fault != nil && fault(w, r, n) {
		return
	}
	s.serve(w, r)
}

// serve answers r from the current object.
func (s *rangeServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data, etag := s.data, s.etag
	s.mu.Unlock()
	if im := r.Header.Get("If-Match"); im != "" && im != etag {
		xmlError(w, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold.")
		return
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" && inm == etag {
		w.Header().Set("ETag", etag)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	first, last, ok := parseRangeHeader(r.Header.Get("Range"))
	if !ok {
		w.Header().Set("ETag", etag)
		w.Write(data)
		return
	}
	if first >= len(data) {
		w.Header().Set("Content-Range", "bytes */"+strconv.Itoa(len(data)))
		xmlError(w, 416, "InvalidRange", "The requested range is not satisfiable")
		return
	}
	last = min(last, len(data)-1)
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, len(data)))
	w.Header().Set("Content-Length", strconv.Itoa(last-first+1))
	w.WriteHeader(http.StatusPartialContent)
	w.Write(data[first : last+1])
}

func parseRangeHeader(h string) (first, last int, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(spec, "-")
	if !found {
		return 0, 0, false
	}
	f, err1 := strconv.Atoi(a)
	l, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || f > l {
		return 0, 0, false
	}
	return f, l, true
}

func xmlError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n<Error><Code>%s</Code><Message>%s</Message><RequestId>R1</RequestId></Error>", code, msg)
}

// mustContain fails unless s holds every want.
func mustContain(t *testing.T, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("message %q lacks %q", s, w)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
