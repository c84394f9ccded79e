package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/iopath"
)

// chunkSet makes chunks with canary-filled destinations.
func chunkSet(specs ...[2]uint64) []Chunk {
	ch := make([]Chunk, len(specs))
	for i, s := range specs {
		ch[i] = Chunk{Off: s[0], Size: s[1], Dst: bytes.Repeat([]byte{0xAA}, int(s[1])+8)}
	}
	return ch
}

// checkChunks verifies every successful chunk holds the P-file bytes and
// that nothing past its size was written.
func checkChunks(t *testing.T, ch []Chunk) {
	t.Helper()
	for i, e := range ch {
		if e.Result < 0 {
			continue
		}
		if e.Result != int64(e.Size) {
			t.Fatalf("chunk %d: result %d, want %d", i, e.Result, e.Size)
		}
		if !bytes.Equal(e.Dst[:e.Size], pfile(int(e.Off), int(e.Size))) {
			t.Fatalf("chunk %d (%d, %d): bytes differ", i, e.Off, e.Size)
		}
		for _, b := range e.Dst[e.Size:] {
			if b != 0xAA {
				t.Fatalf("chunk %d: byte past its size written", i)
			}
		}
	}
}

func TestLoadChunks_BytesEveryConfig(t *testing.T) {
	const size = 12<<20 + 777
	path := writeP(t, size)
	modes := map[string]func(*config.Options){
		"default": nil,
		"nocache": func(o *config.Options) { o.CacheEnabled = false },
		"direct":  func(o *config.Options) { o.DirectMode = config.DirectAlways },
		"smalltask": func(o *config.Options) {
			o.TaskBytes, o.CacheAdmitMaxBytes, o.CacheBlockBytes = 64<<10, 32<<10, 16<<10
		},
	}
	for name, mod := range modes {
		t.Run(name, func(t *testing.T) {
			c := newCtx(t, mod)
			rng := rand.New(rand.NewPCG(1, 2))
			for round := 0; round < 3; round++ {
				var specs [][2]uint64
				pos := uint64(rng.IntN(5000))
				for k := 0; k < 300; k++ { // runs of adjacent chunks, gaps, overlaps
					n := uint64(1 + rng.IntN(20000))
					switch rng.IntN(10) {
					case 0:
						n = uint64(1 + rng.IntN(6<<20)) // larger than a task
					case 1:
						pos -= min(pos, uint64(rng.IntN(3000))) // overlap the previous chunk
					case 2:
						pos += uint64(rng.IntN(50000)) // a gap
					}
					if pos+n > size {
						pos = uint64(rng.IntN(1000))
					}
					specs = append(specs, [2]uint64{pos, n})
					pos += n
				}
				rng.Shuffle(len(specs), func(i, j int) { specs[i], specs[j] = specs[j], specs[i] })
				ch := chunkSet(specs...)
				if err := c.LoadChunks(path, ch, 0); err != nil {
					t.Fatal(err)
				}
				checkChunks(t, ch)
			}
		})
	}
}

func TestLoadChunks_CoalescingCounts(t *testing.T) {
	path := writeP(t, 1<<20)
	c := newCtx(t, func(o *config.Options) { o.CacheEnabled = false })
	var specs [][2]uint64
	for k := uint64(0); k < 10; k++ {
		specs = append(specs, [2]uint64{1000 + 100*k, 100}) // one adjacent run
	}
	specs = append(specs, [2]uint64{50000, 10}, [2]uint64{1050, 100}) // apart; overlapping
	ch := chunkSet(specs...)
	if err := c.LoadChunks(path, ch, 0); err != nil {
		t.Fatal(err)
	}
	checkChunks(t, ch)
	s := c.Stats()
	if s.Requests != 12 || s.Bytes != 1110 || s.CoalescedReads != 3 || s.StorageBytes != 1110 ||
		s.BufferedRequests != 12 || s.BufferedBytes != 1110 || s.ReadvCalls != 0 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestLoadChunks_NotAdmitted(t *testing.T) {
	path := writeP(t, 8<<20)
	c := newCtx(t, func(o *config.Options) { o.TaskBytes, o.CacheAdmitMaxBytes = 1<<20, 2<<20 })
	ch := chunkSet([2]uint64{3, 5<<20 + 1}, [2]uint64{6 << 20, 4096})
	if err := c.LoadChunks(path, ch, 0); err != nil {
		t.Fatal(err)
	}
	checkChunks(t, ch)
	s := c.Stats()
	// [3, 5 MiB + 4) cut at MiB boundaries: 6 pieces; plus the small chunk.
	if s.CoalescedReads != 7 || s.Requests != 2 || s.Bytes != 5<<20+1+4096 {
		t.Fatalf("stats: %+v", s)
	}
	if s.CacheInsertedBytes != 0 {
		t.Fatalf("cache_inserted_bytes %d: chunk loads read once (no admission), large or small", s.CacheInsertedBytes)
	}
}

func TestLoadChunks_CacheHitsServedFromCache(t *testing.T) {
	path := writeP(t, 1<<20)
	c := newCtx(t, nil)
	if err := c.Read(path, 0, 65536, make([]byte, 65536), 0, 0); err != nil {
		t.Fatal(err)
	}
	c.ResetStats()
	// A run of three: the first two are cached, the third is not.
	ch := chunkSet([2]uint64{100, 1000}, [2]uint64{1100, 2000}, [2]uint64{3100, 70000})
	if err := c.LoadChunks(path, ch, 0); err != nil {
		t.Fatal(err)
	}
	checkChunks(t, ch)
	s := c.Stats()
	if s.CacheHitRequests != 2 || s.CacheHitBytes != 3000 || s.StorageBytes != 70000 || s.CoalescedReads != 1 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestLoadChunks_PerChunkErrors(t *testing.T) {
	path := writeP(t, 10000)
	c := newCtx(t, nil)
	ch := chunkSet([2]uint64{0, 100}, [2]uint64{9990, 20}, [2]uint64{100, 100}, [2]uint64{5, 0})
	ch = append(ch, Chunk{Off: 300, Size: 10}) // no destination
	err := c.LoadChunks(path, ch, 0)
	if code(err) != errs.EOF {
		t.Fatalf("error %v, want the EOF of chunk 1", err)
	}
	want := []int64{100, int64(errs.EOF), 100, 0, int64(errs.InvalidArg)}
	for i, w := range want {
		if ch[i].Result != w {
			t.Errorf("chunk %d: result %d, want %d", i, ch[i].Result, w)
		}
	}
	checkChunks(t, ch)
	if !bytes.Equal(ch[1].Dst, bytes.Repeat([]byte{0xAA}, 28)) {
		t.Error("the EOF chunk's destination was written")
	}
	if err := c.LoadChunks(path, nil, 0); err != nil {
		t.Fatalf("no chunks: %v", err)
	}
	ch = chunkSet([2]uint64{0, 10})
	if err := c.LoadChunks(path+".missing", ch, 0); code(err) != errs.NotFound || ch[0].Result != int64(errs.NotFound) {
		t.Fatalf("missing file: %v, result %d", err, ch[0].Result)
	}
	if err := c.loadVersion(path, chunkSet([2]uint64{0, 10}), 0, 12345, chunkFlags); code(err) != errs.IO {
		t.Fatalf("wrong version: %v", err)
	}
}

func TestLoadChunks_ManySmall(t *testing.T) {
	const n = 100000
	path := writeP(t, 4<<20)
	c := newCtx(t, nil)
	rng := rand.New(rand.NewPCG(5, 6))
	specs := make([][2]uint64, n)
	for i := range specs {
		if i%2 == 0 {
			specs[i] = [2]uint64{uint64(i) * 16, 16} // adjacent: a few long runs
		} else {
			specs[i] = [2]uint64{uint64(rng.IntN(4<<20 - 64)), uint64(1 + rng.IntN(64))}
		}
	}
	ch := chunkSet(specs...)
	if err := c.LoadChunks(path, ch, 0); err != nil {
		t.Fatal(err)
	}
	checkChunks(t, ch)
	if s := c.Stats(); s.Requests != n {
		t.Fatalf("requests %d", s.Requests)
	}
}

func TestLoadChunksAsync_EachIndexOnce(t *testing.T) {
	path := writeP(t, 16<<20)
	c := newCtx(t, func(o *config.Options) { o.TaskBytes = 1 << 20 })
	var specs [][2]uint64
	for k := uint64(0); k < 200; k++ {
		specs = append(specs, [2]uint64{k * 50000, 1 + k*97})
	}
	specs = append(specs, [2]uint64{0, 5 << 20}, [2]uint64{16 << 20, 1}) // large; EOF
	ch := chunkSet(specs...)
	var mu sync.Mutex
	published := map[int]int64{}
	r, err := c.LoadChunksAsync(path, ch, 0, func(i int) {
		mu.Lock()
		published[i] = ch[i].Result
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for {
		i, err := r.Next(-1)
		if code(err) == errs.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if seen[i] {
			t.Fatalf("index %d reported twice", i)
		}
		seen[i] = true
		mu.Lock()
		res, ok := published[i]
		mu.Unlock()
		if !ok || res != ch[i].Result || res == 0 {
			t.Fatalf("index %d reported before its result was published (%v %d %d)", i, ok, res, ch[i].Result)
		}
	}
	if len(seen) != len(ch) {
		t.Fatalf("%d of %d indices reported", len(seen), len(ch))
	}
	n, werr, done := r.Wait(-1)
	if !done || code(werr) != errs.EOF || n != sumOK(ch) {
		t.Fatalf("wait: %d %v %v", n, werr, done)
	}
	checkChunks(t, ch)
	if _, err := r.Next(0); code(err) != errs.EOF {
		t.Fatalf("after the last: %v", err)
	}
}

func sumOK(ch []Chunk) uint64 {
	var n uint64
	for _, e := range ch {
		if e.Err == nil {
			n += e.Size
		}
	}
	return n
}

func TestLoadChunksAsync_TimeoutAndNotChunk(t *testing.T) {
	path := writeP(t, 1<<20)
	c := newCtx(t, nil)
	r, err := c.ReadAsync(path, 0, 10, make([]byte, 10), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(0); code(err) != errs.InvalidArg {
		t.Fatalf("Next on a read: %v", err)
	}
	r.Wait(-1)
	// An empty load: done at once, EOF at once.
	r, err = c.LoadChunksAsync(path, nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(time.Second); code(err) != errs.EOF {
		t.Fatalf("empty load: %v", err)
	}
	// A timeout: hold the only async slot... simpler: poll before the start.
	q := &Request{done: make(chan struct{}), chunks: newChunkQueue(make([]Chunk, 1), nil)}
	if _, err := q.Next(0); code(err) != errs.Timeout {
		t.Fatalf("poll: %v", err)
	}
	if _, err := q.Next(time.Millisecond); code(err) != errs.Timeout {
		t.Fatalf("1 ms: %v", err)
	}
}

// Finalizing with requests queued: their chunks are still each reported
// once, with MEMTIER_ERR_CLOSED or their real result.
func TestLoadChunksAsync_CloseSettlesEveryChunk(t *testing.T) {
	path := writeP(t, 4<<20)
	o := config.Defaults()
	o.CacheBytes, o.IOThreads = 16<<20, 1
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []*Request
	var sets [][]Chunk
	for k := 0; k < 20; k++ {
		ch := chunkSet([2]uint64{0, 1 << 20}, [2]uint64{2 << 20, 100})
		r, err := c.LoadChunksAsync(path, ch, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		reqs, sets = append(reqs, r), append(sets, ch)
	}
	c.Close()
	for k, r := range reqs {
		got := 0
		for {
			i, err := r.Next(-1)
			if code(err) == errs.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if res := sets[k][i].Result; res != int64(sets[k][i].Size) && res != int64(errs.Closed) {
				t.Fatalf("request %d chunk %d: result %d", k, i, res)
			}
			got++
		}
		if got != 2 {
			t.Fatalf("request %d: %d chunks reported", k, got)
		}
	}
}

func TestTarCache_LRUAndVersions(t *testing.T) {
	var tc tarCache
	for k := 0; k < maxTarIndexes+10; k++ {
		tc.put(tarKey{fmt.Sprint(k), 1}, nil)
	}
	if tc.len() != maxTarIndexes {
		t.Fatalf("len %d", tc.len())
	}
	if tc.get(tarKey{"0", 1}) != nil || tc.byKey[tarKey{"9", 1}] != nil {
		t.Fatal("oldest entries kept")
	}
	tc.put(tarKey{"50", 2}, nil)
	if _, ok := tc.byKey[tarKey{"50", 1}]; ok {
		t.Fatal("old version of a path kept")
	}
}

func TestPlanChunks_Units(t *testing.T) {
	mk := func(specs ...[2]uint64) ([]Chunk, []int) {
		ch := make([]Chunk, len(specs))
		idx := make([]int, len(specs))
		for i, s := range specs {
			ch[i], idx[i] = Chunk{Off: s[0], Size: s[1]}, i
		}
		return ch, idx
	}
	// A run, a duplicate inside it (own unit, run stays open), a gap.
	ch, idx := mk([2]uint64{0, 10}, [2]uint64{10, 10}, [2]uint64{10, 10}, [2]uint64{20, 5}, [2]uint64{30, 1})
	u := planChunks(ch, idx, 100)
	if len(u) != 3 || len(u[0].members) != 3 || u[0].lo != 0 || u[0].hi != 25 || u[1].lo != 10 || u[2].lo != 30 {
		t.Fatalf("units %+v", u)
	}
	// The task size caps a run; a chunk over it becomes pieces cut at task multiples.
	ch, idx = mk([2]uint64{0, 60}, [2]uint64{60, 60}, [2]uint64{150, 250})
	u = planChunks(ch, idx, 100)
	if len(u) != 5 || !u[2].piece || u[2].lo != 150 || u[2].hi != 200 || u[4].lo != 300 || u[4].hi != 400 {
		t.Fatalf("units %+v", u)
	}
	// At most MaxIOV chunks per run: one preadv each.
	specs := make([][2]uint64, 2*iopath.MaxIOV+1)
	for i := range specs {
		specs[i] = [2]uint64{uint64(i), 1}
	}
	ch, idx = mk(specs...)
	if u = planChunks(ch, idx, 1<<20); len(u) != 3 || len(u[0].members) != iopath.MaxIOV {
		t.Fatalf("%d units", len(u))
	}
}
