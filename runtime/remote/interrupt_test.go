package remote

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/source"
)

// TestInterruptStalledRead: a read whose part stalls (headers never come,
// so only the 30 s header timeout would end it) returns errs.Interrupted
// soon after Interrupt, with no retry; a read started afterwards runs
// normally and gets the object's bytes.
func TestInterruptStalledRead(t *testing.T) {
	data := pattern(objSize, 21)
	s := newRangeServer(t, data)
	s.fault = onRange(secondPart, 1, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	o := fastOptions()
	o.HeaderTimeout = 30 * time.Second
	o.MaxConcurrency = 1
	c := newClient(t, o)
	src := NewSource(c)
	obj, _, err := src.Open(s.URL+"/obj", files.TrustNone)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Release()
	done := make(chan error, 1)
	go func() {
		_, err := src.ReadAt(obj, make([]byte, objSize), 0, source.PathBuffered)
		done <- err
	}()
	for s.requests() < 3 { // the head, the first part, the stalled one
		time.Sleep(time.Millisecond)
	}
	t0 := time.Now()
	c.Interrupt()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("read still running 10 s after Interrupt")
	}
	wantErr(t, err, errs.Interrupted, "remote read", "bytes [5308416, 10551296): interrupted")
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("read returned %v after Interrupt", d)
	}
	if st := c.Stats(); st.Retries != 0 || st.Requests != 3 {
		t.Errorf("stats = %+v; want 3 requests, no retry", st)
	}
	got := make([]byte, objSize)
	if _, err := src.ReadAt(obj, got, 0, source.PathBuffered); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after Interrupt: %v (bytes equal %v)", err, bytes.Equal(got, data))
	}
}

// TestInterruptOpen: Interrupt with nothing in flight changes nothing
// (an Open after it succeeds); an Open stalled on its first GET returns
// errs.Interrupted.
func TestInterruptOpen(t *testing.T) {
	data := pattern(objSize, 22)
	s := newRangeServer(t, data)
	o := fastOptions()
	o.HeaderTimeout = 30 * time.Second
	c := newClient(t, o)
	c.Interrupt()
	src := NewSource(c)
	if obj, _, err := src.Open(s.URL+"/a", files.TrustNone); err != nil {
		t.Fatalf("Open after an idle Interrupt: %v", err)
	} else {
		obj.Release()
	}
	s.fault = onRange("0", 1, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	done := make(chan error, 1)
	go func() {
		_, _, err := src.Open(s.URL+"/b", files.TrustNone)
		done <- err
	}()
	for s.requests() < 2 {
		time.Sleep(time.Millisecond)
	}
	c.Interrupt()
	select {
	case err := <-done:
		wantErr(t, err, errs.Interrupted, "remote open", "interrupted")
	case <-time.After(10 * time.Second):
		t.Fatal("Open still running 10 s after Interrupt")
	}
}
