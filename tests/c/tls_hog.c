/*
 * tls_hog.c: a test-only shared library for test_static_tls (field case B21).
 * It holds about 1 KiB of initial-exec __thread data, so the linker marks it
 * STATIC_TLS and dlopen() must carve its TLS block out of glibc's surplus
 * static TLS (about 1664 bytes by default): after it is loaded, less than
 * half the surplus is left for libmemtier.so, as in a process that loaded
 * libgomp or torch first.
 */
#include <stddef.h>
#include <stdint.h>

#define TLS_HOG_BYTES 1024

static __thread uint8_t hog[TLS_HOG_BYTES] __attribute__((tls_model("initial-exec")));
static __thread uint64_t hog_calls __attribute__((tls_model("initial-exec")));

/* Writes every byte of this thread's hog block and returns a checksum of it, so
 * the TLS is really used. */
__attribute__((visibility("default"))) uint64_t tls_hog_touch(uint8_t seed) {
    uint64_t sum = 0;
    size_t i;
    hog_calls++;
    for (i = 0; i < TLS_HOG_BYTES; i++) hog[i] = (uint8_t)(seed + i);
    for (i = 0; i < TLS_HOG_BYTES; i++) sum += hog[i];
    return sum + hog_calls;
}

/* Bytes of initial-exec TLS this library declares. */
__attribute__((visibility("default"))) size_t tls_hog_bytes(void) {
    return sizeof hog + sizeof hog_calls;
}
