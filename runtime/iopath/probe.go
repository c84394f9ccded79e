//go:build linux

package iopath

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/files"
)

// The device probe: which of O_DIRECT and buffered readahead streams reads a
// cold file faster on a device, measured once per device (st_dev) per
// process and remembered for every Reader.

// Probe sizes. The probe reads four slices at the start of a cold range, in
// the order O_DIRECT, buffered, buffered, O_DIRECT, so drift of a shared,
// noisy device during the probe weighs on both paths alike. The buffered
// slices stay in the page cache for the read that follows; the O_DIRECT ones
// are read once more by it (32 MiB once per device and process).
const (
	probeSlice = 16 << 20
	// ProbeMinBytes is the smallest cold range the probe runs on: the probe
	// covers its first half at most, so the read is not mostly probe.
	ProbeMinBytes = 8 * probeSlice
)

// DeviceSpeed is what the probe measured on one device, in bytes per second.
// Zero values: not measured (the probe has not run, or failed).
type DeviceSpeed struct {
	DirectBps, BufferedBps float64
}

// deviceState is one device's probe: state probeIdle, probeRunning (one
// caller measures; others go on without waiting) or probeDone (speed final).
type deviceState struct {
	state atomic.Int32
	speed DeviceSpeed // written before state becomes probeDone
}

const (
	probeIdle int32 = iota
	probeRunning
	probeDone
)

var devices sync.Map // uint64 st_dev -> *deviceState

// DeviceProbe returns the probe's result for device dev if it has one.
// Safe for concurrent use; a map lookup, no syscall.
func DeviceProbe(dev uint64) (DeviceSpeed, bool) {
	v, ok := devices.Load(dev)
	if !ok {
		return DeviceSpeed{}, false
	}
	d := v.(*deviceState)
	if d.state.Load() != probeDone {
		return DeviceSpeed{}, false
	}
	return d.speed, d.speed.DirectBps > 0 && d.speed.BufferedBps > 0
}

// ProbeDevice measures f's device unless it is measured already or being
// measured by another call, and returns the result when there is one. The
// range [off, off+n) must be inside the file, at least ProbeMinBytes long,
// and the part the probe reads (64 MiB from its first whole MiB) must hold
// under 1/16 of its pages in the page cache (one mincore scan); otherwise it
// measures nothing and leaves the device to a later read. When the file
// system refuses O_DIRECT or a read fails, the failed probe is remembered
// (the device is not probed again in this process; reads go on as if
// unmeasured).
//
// The slices are read into a scratch mapping of probeSlice bytes with the
// Reader's parallelism: O_DIRECT as ReadDirect splits it into tasks,
// buffered as ReadBuffered's streams. Probe bytes are not counted in
// StorageBytes (the request's own read counts its bytes). Safe for
// concurrent use; blocks in pread for the probe's 64 MiB.
func (r *Reader) ProbeDevice(f *files.File, off, n int64) (DeviceSpeed, bool) {
	dev := f.Ident.Dev
	if s, ok := DeviceProbe(dev); ok {
		return s, true
	}
	start := alignUp(off, 1<<20)
	if n < ProbeMinBytes || off < 0 || start+4*probeSlice > min(off+n, f.Ident.Size) {
		return DeviceSpeed{}, false // too small to probe: leave the device for a larger read
	}
	if res, err := Resident(f.FD, start, 4*probeSlice); err != nil || res > probeSlice/4 {
		// Warm pages would make buffered look fast: wait for a colder read.
		return DeviceSpeed{}, false
	}
	v, _ := devices.LoadOrStore(dev, new(deviceState))
	d := v.(*deviceState)
	if !d.state.CompareAndSwap(probeIdle, probeRunning) {
		return DeviceProbe(dev)
	}
	d.speed = r.measure(f, start)
	d.state.Store(probeDone)
	return DeviceProbe(dev)
}

// measure runs the probe on the four slices from start (a multiple of 1 MiB,
// inside the file); zero speeds when it cannot.
func (r *Reader) measure(f *files.File, start int64) DeviceSpeed {
	dfd, memAlign, offAlign, refused, err := f.Direct()
	if err != nil || refused || memAlign > 4096 || (1<<20)%offAlign != 0 {
		return DeviceSpeed{}
	}
	buf, err := unix.Mmap(-1, 0, probeSlice, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return DeviceSpeed{}
	}
	defer unix.Munmap(buf)
	var direct, buffered time.Duration
	for i, isDirect := range [4]bool{true, false, false, true} {
		o := start + int64(i)*probeSlice
		t0 := time.Now()
		var got int
		if isDirect {
			// Tasks of whole MiB keep every O_DIRECT pread aligned
			// whatever TaskBytes is.
			p := splitTasks(o, probeSlice, max(1<<20, alignDown(r.taskBytes, 1<<20)))
			got, err = r.runTasks(p, buf, func(d []byte, o int64) (int, error) {
				return r.PreadFull(dfd, d, o, f.Path, true, offAlign)
			})
		} else {
			got, err = r.readStreams(f, buf, o)
		}
		dt := time.Since(t0)
		if err != nil || got != probeSlice {
			return DeviceSpeed{} // EINVAL from an O_DIRECT pread included: ReadDirect handles that
		}
		if isDirect {
			direct += dt
		} else {
			buffered += dt
		}
	}
	const moved = 2 * probeSlice // bytes per path
	return DeviceSpeed{DirectBps: moved / max(direct.Seconds(), 1e-9), BufferedBps: moved / max(buffered.Seconds(), 1e-9)}
}

// forgetDevices clears every probe result (tests).
func forgetDevices() { devices.Clear() }
