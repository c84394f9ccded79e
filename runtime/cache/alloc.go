package cache

// Allocator hands out fixed-size block buffers for the cache. Get returns a
// buffer of exactly the cache's block size in bytes (len == blockSize), or nil
// when memory is exhausted; its contents may be arbitrary. Put takes back a
// buffer obtained from Get: after Put the allocator owns it again and the cache
// keeps no reference. The engine passes an off-heap (mmap) allocator; tests may
// use HeapAllocator. Implementations must be safe for concurrent use: the cache
// calls Get under a shard mutex and Put from any goroutine that releases the
// last pin of a dropped block.
type Allocator interface {
	Get() []byte
	Put(b []byte)
}

// HeapAllocator is an Allocator backed by make([]byte, Size) (Size in bytes,
// equal to the cache's block size); it is meant for tests and fallbacks. Get
// never returns nil; Put drops the buffer and leaves it to the garbage
// collector. It is safe for concurrent use.
type HeapAllocator struct{ Size int }

// Get returns a new zeroed buffer of Size bytes, owned by the caller.
func (a HeapAllocator) Get() []byte { return make([]byte, a.Size) }

// Put forgets b; the garbage collector reclaims it.
func (a HeapAllocator) Put(b []byte) {}
