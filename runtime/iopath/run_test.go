//go:build linux

package iopath

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
)

func TestRunCoversEveryIndexOnce(t *testing.T) {
	r := newReader(t, config.Defaults(), nil)
	const n = 1000
	var hits [n]atomic.Int32
	if err := r.Run(n, 4, func(i int) error { hits[i].Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range hits {
		if hits[i].Load() != 1 {
			t.Fatalf("index %d ran %d times", i, hits[i].Load())
		}
	}
	if err := r.Run(0, 4, func(int) error { panic("called") }); err != nil {
		t.Fatal(err)
	}
}

func TestRunConcurrencyBound(t *testing.T) {
	r := newReader(t, config.Defaults(), nil)
	for _, par := range []int{1, 2, 3, 8} {
		var cur, peak atomic.Int32
		err := r.Run(64, par, func(int) error {
			c := cur.Add(1)
			for {
				p := peak.Load()
				if c <= p || peak.CompareAndSwap(p, c) {
					break
				}
			}
			time.Sleep(200 * time.Microsecond) // let workers overlap
			cur.Add(-1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if int(peak.Load()) > par {
			t.Fatalf("par %d: %d tasks ran at once", par, peak.Load())
		}
		if par > 1 && peak.Load() < 2 {
			t.Logf("par %d: tasks never overlapped (busy machine?)", par)
		}
	}
}

func TestRunLowestIndexError(t *testing.T) {
	r := newReader(t, config.Defaults(), nil)
	for trial := 0; trial < 20; trial++ {
		var ran atomic.Int32
		err := r.Run(100, 4, func(i int) error {
			ran.Add(1)
			switch i {
			case 7:
				time.Sleep(time.Millisecond) // finishes after the higher failures
				return errors.New("seven")
			case 9, 30:
				return errors.New("later")
			}
			return nil
		})
		if err == nil || err.Error() != "seven" {
			t.Fatalf("trial %d: got %v, want the error of index 7", trial, err)
		}
		if ran.Load() == 100 && trial == 0 {
			t.Log("no task was skipped after the failure (allowed, only slower)")
		}
	}
}

func TestRunRecoversPanics(t *testing.T) {
	r := newReader(t, config.Defaults(), nil)
	// On the calling goroutine.
	err := r.Run(1, 1, func(int) error { panic("boom on caller") })
	if errs.CodeOf(err) != errs.Internal || !strings.Contains(err.Error(), "boom on caller") {
		t.Fatalf("caller panic: %v", err)
	}
	// On a helper goroutine, through the test hook.
	r.PanicNextTask()
	err = r.Run(64, 4, func(int) error { time.Sleep(100 * time.Microsecond); return nil })
	if errs.CodeOf(err) != errs.Internal || !strings.Contains(err.Error(), "PanicNextTask") {
		t.Fatalf("helper panic: %v", err)
	}
	if r.panicNext.Load() {
		t.Fatal("the hook did not fire")
	}
	// A nil dereference is a runtime error panic, not a string.
	var p *int
	err = r.Run(8, 4, func(i int) error {
		if i == 5 {
			return errors.New(string(rune(*p)))
		}
		return nil
	})
	if errs.CodeOf(err) != errs.Internal || !strings.Contains(err.Error(), "nil pointer") {
		t.Fatalf("nil dereference: %v", err)
	}
	// The Reader keeps working afterwards.
	if err := r.Run(8, 4, func(int) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestRunWithoutTokens shows Run never waits for a token: with the process
// bound used up it runs everything on the calling goroutine.
func TestRunWithoutTokens(t *testing.T) {
	r := newReader(t, config.Defaults(), nil)
	limit := helperTokens.limit.Load()
	helperTokens.used.Add(limit)
	defer helperTokens.used.Add(-limit)
	var cur, peak atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- r.Run(16, 8, func(int) error {
			c := cur.Add(1)
			if c > peak.Load() {
				peak.Store(c)
			}
			time.Sleep(50 * time.Microsecond)
			cur.Add(-1)
			return nil
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run blocked waiting for a helper token")
	}
	if peak.Load() != 1 {
		t.Fatalf("%d tasks ran at once without tokens", peak.Load())
	}
}

func TestRunNested(t *testing.T) {
	r := newReader(t, config.Defaults(), nil)
	var total atomic.Int64
	err := r.Run(32, 8, func(int) error {
		return r.Run(32, 8, func(int) error { total.Add(1); return nil })
	})
	if err != nil || total.Load() != 32*32 {
		t.Fatalf("nested: err %v, %d inner calls", err, total.Load())
	}
	if used := helperTokens.used.Load(); used != 0 {
		t.Fatalf("%d helper tokens leaked", used)
	}
}
