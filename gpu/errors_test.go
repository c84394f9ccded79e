package gpu

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

func TestErrorText(t *testing.T) {
	for _, c := range []struct {
		e    *Error
		want string
	}{
		{&Error{Kind: KindUnavailable, Op: "cuInit", Code: 100, CodeName: "CUDA_ERROR_NO_DEVICE"},
			"cuInit failed: CUDA_ERROR_NO_DEVICE (100)"},
		{&Error{Kind: KindUnavailable, Detail: "libcuda.so.1 not loaded: nope"}, "libcuda.so.1 not loaded: nope"},
		{&Error{Kind: KindIO, Op: "cuFileRead", Errno: syscall.EIO}, "cuFileRead failed: " + syscall.EIO.Error()},
		{&Error{Kind: KindIO, Detail: "cuFileRead error 5030", Code: 5030, CodeName: "CU_FILE_INTERNAL_ERROR"},
			"cuFileRead error 5030: CU_FILE_INTERNAL_ERROR (5030)"},
		{&Error{Kind: KindCUDA, Op: "cuX", Code: 42}, "cuX failed: error 42"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}

func TestErrorClassification(t *testing.T) {
	io := &Error{Kind: KindIO, Op: "cuFileRead", Errno: syscall.EIO, reason: "gds_read"}
	wrapped := fmt.Errorf("read x: %w", io)
	if !errors.Is(wrapped, syscall.EIO) || KindOf(wrapped) != KindIO {
		t.Fatal("errno or kind lost through wrapping")
	}
	if r, ok := FallbackReason(wrapped); !ok || r != "gds_read" {
		t.Fatalf("FallbackReason %q %v", r, ok)
	}
	for k, fallback := range map[Kind]bool{
		KindUnavailable: true, KindUnsupported: true, KindIO: true,
		KindInvalidPointer: false, KindNoMemory: false, KindCUDA: false, KindClosed: false, KindInvalidArg: false,
	} {
		if got := (&Error{Kind: k}).Fallback(); got != fallback {
			t.Errorf("%v.Fallback() = %v", k, got)
		}
		if (&Error{Kind: k}).Reason() == "" || k.String() == "" {
			t.Errorf("%v has no reason or name", k)
		}
	}
	if _, ok := FallbackReason(errors.New("other")); ok {
		t.Fatal("a foreign error allows fallback")
	}
	if KindOf(nil) != 0 {
		t.Fatal("KindOf(nil)")
	}
}

func TestStats(t *testing.T) {
	var nilStats *Stats
	nilStats.Fallback("x")
	if s := nilStats.Snapshot(); s.FallbackTotal != 0 || s.Fallbacks == nil {
		t.Fatal("nil Stats")
	}
	st := new(Stats)
	st.Fallback("fs_unsupported")
	st.Fallback("gds_read")
	st.Fallback("fs_unsupported")
	st.stagedBytes.Add(10)
	s := st.Snapshot()
	if s.FallbackTotal != 3 || s.Fallbacks["fs_unsupported"] != 2 || s.StagedBytes != 10 {
		t.Fatalf("snapshot %+v", s)
	}
	if r := s.FallbackReasons(); len(r) != 2 || r[0] != "fs_unsupported" {
		t.Fatalf("FallbackReasons %v", r)
	}
	s.Fallbacks["x"] = 1 // a copy
	if st.Snapshot().Fallbacks["x"] != 0 {
		t.Fatal("the snapshot shares its map")
	}
}

func TestOptionDefaults(t *testing.T) {
	o, err := StagerOptions{}.withDefaults()
	if err != nil || o.ChunkSize != DefaultChunkSize || o.Depth != 2 || o.Lanes != DefaultLanes {
		t.Fatalf("%+v %v", o, err)
	}
	h, err := HBMOptions{Budget: 8 << 20}.withDefaults()
	if err != nil || h.BlockSize != DefaultHBMBlockSize {
		t.Fatalf("%+v %v", h, err)
	}
	if _, err := (HBMOptions{Budget: 1}).withDefaults(); KindOf(err) != KindInvalidArg {
		t.Fatal("budget below a block accepted")
	}
}

func TestAboutBuffer(t *testing.T) {
	for code, want := range map[int]bool{5012: true, 5013: true, 5014: true, 5015: true, 5036: true, 5043: true,
		5047: true, 5030: false, 5008: false, 0: false} {
		err := fmt.Errorf("wrapped: %w", &Error{Kind: KindIO, Code: code})
		if got := AboutBuffer(err); got != want {
			t.Errorf("AboutBuffer(code %d) = %v, want %v", code, got, want)
		}
	}
	if AboutBuffer(errors.New("plain")) {
		t.Error("AboutBuffer of a plain error")
	}
}
