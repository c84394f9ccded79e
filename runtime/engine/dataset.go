package engine

import (
	"io"

	"github.com/memtier/memtier/runtime/diskcache"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/objects"
	"github.com/memtier/memtier/runtime/remote"
)

// Dataset is a list of samples, byte ranges of one data file: a packed
// dataset (data file + index file) or a tar shard (each regular member is a
// sample). Like SafetensorsFile it remembers the data file's version, and a
// read after the file changed fails with errs.IO "changed since open": the
// sample ranges describe the version they were made for. A local file is
// checked per read as the context's freshness says; a remote object's
// version is the one checked at open (remoteSamplesTrust). Safe for
// concurrent use; it holds no descriptor.
type Dataset struct {
	Path    string              // the data file (the tar file for a shard)
	Records []objects.Record    // packed: sample k is Records[k]; nil for a tar shard
	Members []objects.TarMember // tar: sample k is Members[k] (shared; do not modify)
	c       *Context
	version uint64
	pass    *samplePass // nil unless the object is remote below a disk cache
}

// remoteSamplesTrust is the freshness of a dataset's sample reads of a
// remote object, whatever the context's: the handle is bound to the version
// (ETag) it checked at open, as include/memtier.h documents, so its reads
// send no revalidation GET (strict freshness sent one per read or batch: 64
// an epoch of bench_remote's tar shards, a round trip to the server before
// each batch of DRAM or disk-cache hits). Never stale nor mixed all the same:
// the caches hold bytes per version, a GET for what they lack is pinned to
// the handle's ETag (If-Match: an overwrite fails with errs.IO "changed since
// open"), and a newer version seen by any other read of the context (which
// revalidates as its freshness says) fails the handle's next read the same
// way (loadChunks' version check).
const remoteSamplesTrust = files.TrustForever

// OpenDataset opens the packed dataset dataPath described by indexPath
// (objects.ParseIndex, every record checked against the data file's size);
// either may be a local path or a URL (s3://, http(s)://). Errors: errs.Format for an index that does not parse or has a record
// past the data file's end, the open errors of Read for either file,
// errs.InvalidArg for an empty path, errs.Closed.
func (c *Context) OpenDataset(dataPath, indexPath string) (*Dataset, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	if dataPath == "" || indexPath == "" {
		return nil, errs.New(errs.InvalidArg, "dataset_open", "empty path")
	}
	f, err := c.openTrusting(dataPath, files.TrustNone) // validated at open (doc.go)
	if err != nil {
		return nil, err
	}
	size, version := int64(f.Size()), f.Version()
	pass := c.newSamplePass(f)
	f.Release()
	recs, err := c.parseIndex(indexPath, size)
	if err != nil {
		return nil, err
	}
	return &Dataset{Path: dataPath, Records: recs, c: c, version: version, pass: pass.sized(len(recs))}, nil
}

// parseIndex parses the index file indexPath of a data file of dataSize
// bytes: a local file as objects.ParseIndexFile reads it (its open errors,
// a directory refused), a URL through the context's sources with ranged
// reads (objectReader).
func (c *Context) parseIndex(indexPath string, dataSize int64) ([]objects.Record, error) {
	if !remote.HasScheme(indexPath) {
		return objects.ParseIndexFile(indexPath, dataSize)
	}
	f, err := c.openTrusting(indexPath, files.TrustNone)
	if err != nil {
		return nil, err
	}
	defer f.Release()
	recs, err := objects.ParseIndex(c.metaReader(f), int64(f.Size()), dataSize)
	if err != nil {
		return nil, stampPath(err, displayName(f))
	}
	return recs, nil
}

// OpenTarDataset opens the tar shard path, a local file or a URL
// (objects.ParseTar over ranged reads of the object). The member list
// is kept by the context per file version (at most maxTarIndexes shards), so
// opening the same shard again reads no headers; below a disk cache it is
// also kept beside the shard's blocks (diskcache.MetaTarIndex), so another
// process opening the same version reads no headers either (a scan through
// the disk tier reads every piece of a shard of small samples). Below a
// disk cache the headers are read through tarFetchReader: the shard's disk
// blocks are fetched a window of several at a time, their GETs in parallel,
// instead of one block after another as the parser reached it. Safe to call
// from several goroutines at once (python/memtier/webdataset.py opens a
// dataset's URL shards in parallel). Errors: errs.Format for a
// malformed archive, the open errors of Read, errs.InvalidArg, errs.Closed.
func (c *Context) OpenTarDataset(path string) (*Dataset, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	if path == "" {
		return nil, errs.New(errs.InvalidArg, "dataset_open_tar", "empty path")
	}
	f, err := c.openTrusting(path, files.TrustNone) // validated at open (doc.go)
	if err != nil {
		return nil, err
	}
	defer f.Release()
	pass := c.newSamplePass(f)
	key := tarKey{path: f.Name(), version: f.Version()}
	members := c.tars.get(key)
	if members == nil {
		ro, _ := f.(*remote.Object)
		disk := c.diskTier()
		if ro != nil && disk != nil {
			if b, ok := disk.GetMeta(ro, diskcache.MetaTarIndex); ok {
				members = decodeTarIndex(b, f.Size())
			}
		}
		if members == nil {
			var r io.ReaderAt = c.metaReader(f)
			if ro != nil && disk != nil {
				fr := newTarFetchReader(disk, ro)
				defer fr.release()
				r = fr
			}
			if members, err = objects.ParseTar(r, int64(f.Size())); err != nil {
				return nil, stampPath(err, displayName(f))
			}
			if ro != nil && disk != nil {
				disk.PutMeta(ro, diskcache.MetaTarIndex, encodeTarIndex(members))
			}
		}
		c.tars.put(key, members)
	}
	return &Dataset{Path: path, Members: members, c: c, version: f.Version(), pass: pass.sized(len(members))}, nil
}

// Len is the number of samples.
func (d *Dataset) Len() int {
	if d.Members != nil {
		return len(d.Members)
	}
	return len(d.Records)
}

// Sample returns sample i's byte range and, for a tar shard, its member name
// ("" for a packed dataset). ok is false for an index out of range.
func (d *Dataset) Sample(i uint64) (off, size uint64, name string, ok bool) {
	if i >= uint64(d.Len()) {
		return 0, 0, "", false
	}
	if d.Members != nil {
		m := &d.Members[i]
		return uint64(m.Offset), uint64(m.Size), m.Name, true
	}
	r := &d.Records[i]
	return uint64(r.Offset), uint64(r.Length), "", true
}

func (d *Dataset) outOfRange(op string, i uint64) error {
	return errs.At(errs.InvalidArg, op, d.Path, -1, "sample index %d out of range (%d samples)", i, d.Len())
}

// Read reads sample i into dst, which must hold at least its bytes
// (errs.InvalidArg otherwise, nothing written).
func (d *Dataset) Read(i uint64, dst []byte, target int) error {
	off, size, _, ok := d.Sample(i)
	if !ok {
		return d.outOfRange("dataset_read", i)
	}
	if uint64(len(dst)) < size {
		return errs.At(errs.InvalidArg, "dataset_read", d.Path, int64(off),
			"destination holds %d bytes, sample %d has %d", len(dst), i, size)
	}
	d.pass.mark(i)
	return d.c.loadSamples(d.Path, []Chunk{{Off: off, Size: size, Dst: dst}}, target, d.version, d.pass.admitDisk())
}

// ReadBatch reads samples idx[k] into dsts[k] (each at least that sample's
// size; len(dsts) == len(idx)) as one LoadChunks call: adjacent samples are
// read together, the rest in parallel. results[k] gets bytes read or a
// negative status; an index out of range fails that entry alone. The error is
// the lowest-index failure.
func (d *Dataset) ReadBatch(idx []uint64, dsts [][]byte, results []int64, target int) error {
	if len(dsts) != len(idx) || len(results) != len(idx) {
		return errs.At(errs.InvalidArg, "dataset_read_batch", d.Path, -1,
			"%d indices, %d destinations, %d results", len(idx), len(dsts), len(results))
	}
	ch := make([]Chunk, len(idx))
	bad := map[int]error{}
	for k, i := range idx {
		off, size, _, ok := d.Sample(i)
		if !ok {
			bad[k] = d.outOfRange("dataset_read_batch", i)
			continue
		}
		ch[k] = Chunk{Off: off, Size: size, Dst: dsts[k]}
		d.pass.mark(i)
	}
	err := d.c.loadSamples(d.Path, ch, target, d.version, d.pass.admitDisk())
	var first error
	for k := range ch {
		results[k] = ch[k].Result
		e := ch[k].Err
		if b := bad[k]; b != nil {
			results[k], e = int64(errs.CodeOf(b)), b
		}
		if e != nil && first == nil {
			first = e
		}
	}
	if first == nil {
		return err
	}
	return first
}
