/*
 * downstream.c: a program built outside the MemTier tree, against an installed
 * MemTier (find_package(memtier) or pkg-config). It writes a small file,
 * reads a range back through memtier_read and checks the bytes.
 */
#define _GNU_SOURCE
#include <memtier.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIZE 100000

static uint8_t pattern(uint64_t i) { return (uint8_t)((i * 131 + 7) & 0xFF); }

int main(void) {
    const char* tmp = getenv("TMPDIR");
    char dir[512], path[600];
    static uint8_t data[SIZE], got[SIZE];
    uint64_t i;
    int rc = 1;

    if (strcmp(memtier_version(), MEMTIER_VERSION_STRING) != 0) {
        fprintf(stderr, "library %s does not match header %s\n", memtier_version(),
                MEMTIER_VERSION_STRING);
        return 1;
    }
    snprintf(dir, sizeof dir, "%s/memtier_downstream_XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/data.bin", dir);
    for (i = 0; i < SIZE; i++) data[i] = pattern(i);
    FILE* f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, SIZE, f) != SIZE || fclose(f) != 0) {
        perror(path);
        return 1;
    }

    memtier_ctx_t* ctx = NULL;
    int st = memtier_init(NULL, &ctx);
    if (st == MEMTIER_OK) st = memtier_read(ctx, path, 1234, SIZE - 1234, got, MEMTIER_TARGET_CPU);
    if (st != MEMTIER_OK) {
        fprintf(stderr, "memtier: %s: %s\n", memtier_strerror(st), memtier_last_error());
    } else if (memcmp(got, data + 1234, SIZE - 1234) != 0) {
        fprintf(stderr, "memtier_read returned wrong bytes\n");
    } else {
        printf("downstream: read %d bytes with MemTier %s\n", SIZE - 1234, memtier_version());
        rc = 0;
    }
    memtier_finalize(ctx);
    unlink(path);
    rmdir(dir);
    return rc;
}
