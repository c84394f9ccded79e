package gpu

// Alignment is the alignment of every pinned staging buffer and the unit of
// Stager chunk boundaries in the file: O_DIRECT needs no more on Linux block
// devices and file systems (statx's dio_offset_align is at most a page).
const Alignment = 4096

// Defaults for StagerOptions and HBMOptions.
const (
	DefaultChunkSize    = 8 << 20 // bytes per pinned staging buffer
	DefaultDepth        = 2       // buffers per lane: double buffering
	DefaultLanes        = 4       // concurrent ReadToDevice calls
	DefaultHBMBlockSize = 2 << 20 // bytes per HBM cache block
)

// ReadFunc fills buf with the file bytes at fileOff: exactly len(buf) bytes,
// or it returns an error (which ReadToDevice returns unchanged). buf is a
// slice of a pinned, page-aligned staging buffer: &buf[0] is a multiple of
// Alignment and cap(buf) is at least len(buf) rounded up to Alignment, so an
// O_DIRECT pread may fill buf[:roundUp(len(buf))] when fileOff is aligned
// (only buf[:len(buf)] is copied to the device). buf must not be retained
// after the call returns.
type ReadFunc func(buf []byte, fileOff uint64) error

// StagerOptions sizes a Stager. Zero fields take the defaults.
type StagerOptions struct {
	// ChunkSize is the size of each pinned buffer and the most bytes one
	// read callback fills: a multiple of Alignment (default 8 MiB).
	ChunkSize uint64
	// Depth is the number of buffers per lane, at least 2 (default 2):
	// reading chunk i+1 overlaps the copy of chunk i.
	Depth int
	// Lanes is the number of ReadToDevice calls served at once (default 4);
	// more wait for a free lane. Pinned memory is at most
	// Lanes * Depth * ChunkSize, allocated lane by lane on first use.
	Lanes int
	// Stats receives the counters (nil: none).
	Stats *Stats
}

func (o StagerOptions) withDefaults() (StagerOptions, error) {
	if o.ChunkSize == 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if o.Depth == 0 {
		o.Depth = DefaultDepth
	}
	if o.Lanes == 0 {
		o.Lanes = DefaultLanes
	}
	switch {
	case o.ChunkSize%Alignment != 0 || o.ChunkSize > 1<<30:
		return o, &Error{Kind: KindInvalidArg, Op: "NewStager", Detail: "ChunkSize must be a multiple of 4096 and at most 1 GiB"}
	case o.Depth < 2 || o.Depth > 64:
		return o, &Error{Kind: KindInvalidArg, Op: "NewStager", Detail: "Depth must be 2..64"}
	case o.Lanes < 1 || o.Lanes > 1024:
		return o, &Error{Kind: KindInvalidArg, Op: "NewStager", Detail: "Lanes must be 1..1024"}
	}
	return o, nil
}

// HBMOptions sizes an HBMCache.
type HBMOptions struct {
	// Device is the CUDA device ordinal whose memory holds the cache.
	Device int
	// Budget is the most device memory the cache holds, in bytes; it holds
	// Budget / BlockSize blocks (at least one).
	Budget uint64
	// BlockSize is the size of one cached block in bytes (default 2 MiB).
	BlockSize uint64
	// Stats receives the counters (nil: none).
	Stats *Stats
}

func (o HBMOptions) withDefaults() (HBMOptions, error) {
	if o.BlockSize == 0 {
		o.BlockSize = DefaultHBMBlockSize
	}
	switch {
	case o.Device < 0:
		return o, &Error{Kind: KindInvalidArg, Op: "NewHBMCache", Detail: "negative device ordinal"}
	case o.Budget < o.BlockSize:
		return o, &Error{Kind: KindInvalidArg, Op: "NewHBMCache", Detail: "Budget is smaller than one block"}
	}
	return o, nil
}

// BlockKey names one cached block: a file identity chosen by the engine
// (stable for one version of one file) and the block index (file offset /
// block size).
type BlockKey struct {
	File  uint64
	Index uint64
}

// HBMCopy is one copy out of the HBM cache for HBMCache.LookupAll: Len bytes
// at BlockOff of the block Key to device memory at Dst.
type HBMCopy struct {
	Key      BlockKey
	BlockOff uint64
	Dst      uintptr
	Len      uint64
}
