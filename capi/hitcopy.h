/* The copy of a DRAM-cache hit (hit.c), picked once per process from what
 * the CPU offers (internal, not installed).
 *
 * A hit copies a few KiB from a random place in a large cache, so the
 * source is usually in DRAM and the copy is bound by how many of its lines
 * are in flight, not by instructions. Measured on the build VMs (random
 * 4 KiB from 256 MiB of huge pages into a 1 MiB ring; examples/bench/
 * bench_hot_path.c's floors):
 *   - with ERMS (fast rep movsb, an AVX-512 machine): rep movsb keeps more
 *     of the copy in flight than glibc's vector loop, which glibc uses below
 *     its rep-movsb threshold (8 KiB there);
 *   - without ERMS (an AMD EPYC VM, whose hypervisor hides the bit): glibc's
 *     AVX loop 520-580 ns, rep movsq 420-500 ns, and the AVX2 loop below,
 *     which prefetches the source 512 B ahead, 450-500 ns; from a source in
 *     the CPU caches (1 MiB) rep movsq takes 380-400 ns against 190-220 ns
 *     for either vector loop, so the string copy is not used there. Prefetch
 *     distances of 256 B were as good, 1-2 KiB worse; prefetching the whole
 *     source first, or the destination for writing, was slower.
 * Below 1 KiB (a string copy's start-up, a loop's prologue) and elsewhere:
 * memcpy. */
#ifndef MEMTIER_HITCOPY_H
#define MEMTIER_HITCOPY_H
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

enum { MT_COPY_UNPROBED = -1, MT_COPY_MEMCPY = 0, MT_COPY_MOVSB = 1, MT_COPY_AVX2 = 2 };
static int mt_copy_kind = MT_COPY_UNPROBED;

/* AVX2 that the OS saves (OSXSAVE, and XCR0's SSE and AVX state bits). */
static int mt_cpu_avx2(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)) || !(c & (1u << 28))) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 6u) != 6u) return 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 5)) != 0;
}

static __attribute__((noinline)) int mt_probe_copy(void) {
    unsigned a, b, c, d;
    int k = MT_COPY_MEMCPY;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 9)) != 0)
        k = MT_COPY_MOVSB;
    else if (mt_cpu_avx2())
        k = MT_COPY_AVX2;
    __atomic_store_n(&mt_copy_kind, k, __ATOMIC_RELAXED);
    return k;
}

/* How far ahead of its loads the AVX2 loop prefetches the source (bytes). */
#define MT_COPY_PREFETCH 512

/* n >= 128 bytes: 128-byte steps with unaligned 32-byte loads and stores,
 * the source prefetched MT_COPY_PREFETCH ahead; the tail by memcpy. */
static __attribute__((noinline, target("avx2"))) void mt_copy_avx2(void* dst, const void* src, uint64_t n) {
    const char* p = (const char*)src;
    char* q = (char*)dst;
    for (uint64_t l = 0; l < MT_COPY_PREFETCH && l < n; l += 64) __builtin_prefetch(p + l);
    const uint64_t whole = n & ~(uint64_t)127;
    for (uint64_t i = 0; i < whole; i += 128) {
        if (i + MT_COPY_PREFETCH < n) {
            __builtin_prefetch(p + i + MT_COPY_PREFETCH);
            __builtin_prefetch(p + i + MT_COPY_PREFETCH + 64);
        }
        const __m256i v0 = _mm256_loadu_si256((const __m256i*)(p + i));
        const __m256i v1 = _mm256_loadu_si256((const __m256i*)(p + i + 32));
        const __m256i v2 = _mm256_loadu_si256((const __m256i*)(p + i + 64));
        const __m256i v3 = _mm256_loadu_si256((const __m256i*)(p + i + 96));
        _mm256_storeu_si256((__m256i*)(q + i), v0);
        _mm256_storeu_si256((__m256i*)(q + i + 32), v1);
        _mm256_storeu_si256((__m256i*)(q + i + 64), v2);
        _mm256_storeu_si256((__m256i*)(q + i + 96), v3);
    }
    if (whole < n) memcpy(q + whole, p + whole, n - whole);
}

/* n >= 1024 bytes, as mt_copy_avx2 but with streaming (non-temporal)
 * stores from the first 32-byte-aligned destination address: the lines are
 * written without being read first (no read-for-ownership) and do not evict
 * the caller's cache. For copies into a destination too large to stay in
 * the CPU caches (a readv batch of MiBs); the caller issues _mm_sfence
 * before the bytes are handed on. */
static __attribute__((noinline, target("avx2"))) void mt_copy_avx2_stream(void* dst, const void* src, uint64_t n) {
    const char* p = (const char*)src;
    char* q = (char*)dst;
    const uint64_t head = (32 - ((uintptr_t)q & 31)) & 31;
    if (head) {
        memcpy(q, p, head);
        p += head;
        q += head;
        n -= head;
    }
    for (uint64_t l = 0; l < MT_COPY_PREFETCH && l < n; l += 64) __builtin_prefetch(p + l);
    const uint64_t whole = n & ~(uint64_t)127;
    for (uint64_t i = 0; i < whole; i += 128) {
        if (i + MT_COPY_PREFETCH < n) {
            __builtin_prefetch(p + i + MT_COPY_PREFETCH);
            __builtin_prefetch(p + i + MT_COPY_PREFETCH + 64);
        }
        const __m256i v0 = _mm256_loadu_si256((const __m256i*)(p + i));
        const __m256i v1 = _mm256_loadu_si256((const __m256i*)(p + i + 32));
        const __m256i v2 = _mm256_loadu_si256((const __m256i*)(p + i + 64));
        const __m256i v3 = _mm256_loadu_si256((const __m256i*)(p + i + 96));
        _mm256_stream_si256((__m256i*)(q + i), v0);
        _mm256_stream_si256((__m256i*)(q + i + 32), v1);
        _mm256_stream_si256((__m256i*)(q + i + 64), v2);
        _mm256_stream_si256((__m256i*)(q + i + 96), v3);
    }
    if (whole < n) memcpy(q + whole, p + whole, n - whole);
}

/* mt_copy_bytes_stream: mt_copy_bytes, with streaming stores where the
 * AVX2 loop is the copy (elsewhere as mt_copy_bytes: rep movsb of an ERMS
 * machine already writes large copies without reading the lines). */
static inline void mt_copy_bytes_stream(void* dst, const void* src, uint64_t n) {
    int k = __atomic_load_n(&mt_copy_kind, __ATOMIC_RELAXED);
    if (__builtin_expect(k < 0, 0)) k = mt_probe_copy();
    if (n < 1024 || k == MT_COPY_MEMCPY) {
        memcpy(dst, src, n);
    } else if (k == MT_COPY_MOVSB) {
        __asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
    } else {
        mt_copy_avx2_stream(dst, src, n);
    }
}

/* Orders streaming stores before what follows. */
static inline void mt_copy_stream_fence(void) { _mm_sfence(); }

/* mt_copy_bytes copies n bytes from src to dst (no overlap) the way
 * mt_probe_copy picked; thread-safe (the probe may run twice, alike). */
static inline void mt_copy_bytes(void* dst, const void* src, uint64_t n) {
    int k = __atomic_load_n(&mt_copy_kind, __ATOMIC_RELAXED);
    if (__builtin_expect(k < 0, 0)) k = mt_probe_copy();
    if (n < 1024 || k == MT_COPY_MEMCPY) {
        memcpy(dst, src, n);
    } else if (k == MT_COPY_MOVSB) {
        __asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
    } else {
        mt_copy_avx2(dst, src, n);
    }
}
#else
static inline void mt_copy_bytes(void* dst, const void* src, uint64_t n) { memcpy(dst, src, n); }
static inline void mt_copy_bytes_stream(void* dst, const void* src, uint64_t n) { memcpy(dst, src, n); }
static inline void mt_copy_stream_fence(void) {}
#endif

#endif
