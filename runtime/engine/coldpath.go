package engine

import (
	"math"

	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/iopath"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/source"
)

// Cold large reads: the device probe's result as the policy sees it. The
// probe itself (iopath.Reader.ProbeDevice) measures O_DIRECT against
// buffered readahead streams once per device per process; its result decides
// cold large READ_ONCE reads (policy rows 7 and 16) and is shown by explain.

// coldProbe fills in.Probe for a large AUTO READ_ONCE read (decide calls it
// once residency is in in) of a local file, running the device probe first
// when the policy says the probe could change the path (policy.NeedsProbe:
// cold, and the device not measured yet). Other sources have no probe.
func (c *Context) coldProbe(o source.Object, off, size uint64, in *policy.Input) {
	f, ok := o.(*files.File)
	if !ok {
		return
	}
	in.Probe = c.deviceProbe(f)
	if policy.NeedsProbe(c.pol, *in) {
		in.Probe = c.probeDevice(f, off, size)
	}
}

// objProbe is deviceProbe for any source object: a zero Probe for sources
// other than local files. For explain's Input (it never probes).
func (c *Context) objProbe(o source.Object) policy.Probe {
	if f, ok := o.(*files.File); ok {
		return c.deviceProbe(f)
	}
	return policy.Probe{}
}

// deviceProbe returns what the probe measured on f's device, or a zero Probe
// when it has not run. A map lookup: no syscall, no I/O.
func (c *Context) deviceProbe(f *files.File) policy.Probe {
	s, _ := iopath.DeviceProbe(f.Ident.Dev)
	return probeOf(s)
}

// probeDevice runs the device probe on [off, off+size) of f if the device is
// not measured yet and the range suits it (iopath.ProbeMinBytes, cold), and
// returns the result (zero when it did not run).
func (c *Context) probeDevice(f *files.File, off, size uint64) policy.Probe {
	s, _ := c.rd.ProbeDevice(f, int64(off), int64(size))
	return probeOf(s)
}

// probeOf converts bytes per second to the policy's MB/s, at least 1 for a
// measured path so that Probe.Measured stays true.
func probeOf(s iopath.DeviceSpeed) policy.Probe {
	mbps := func(bps float64) uint32 {
		if bps <= 0 {
			return 0
		}
		return uint32(max(1, min(math.MaxUint32, math.Round(bps/1e6))))
	}
	return policy.Probe{DirectMBps: mbps(s.DirectBps), BufferedMBps: mbps(s.BufferedBps)}
}
