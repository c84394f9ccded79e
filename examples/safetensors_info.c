/*
 * safetensors_info: lists the tensors of a safetensors file through
 * memtier_safetensors_open, one line per tensor in data order:
 *
 *     name dtype shape offset nbytes [fnv1a64]
 *
 * shape is "[d0,d1,...]", offset the absolute byte offset of the payload in
 * the file, nbytes its size. With --checksum the payloads are loaded with
 * memtier_safetensors_load_all (adjacent tensors coalesced and read in
 * parallel; at most --batch bytes of buffers at a time) and each line ends
 * with the 64-bit FNV-1a hash of the tensor's bytes, as 16 hex digits
 * (offset basis 0xcbf29ce484222325, prime 0x100000001b3, over bytes). Names
 * are printed as stored, with bytes below 0x20, 0x7f, '\' and ' ' written as
 * \xNN (a name may hold a NUL). Metadata entries follow, sorted by key, as
 * "# key = value".
 *
 * With no FILE it writes a small file (BF16, F32, F8_E4M3, a zero-element
 * tensor, metadata) to $TMPDIR, lists it with checksums and checks every hash
 * against the bytes it wrote.
 *
 * Exit 0 (OK), 1 (the file is malformed, a read or a check failed), 2 (usage).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memtier.h"
#include "mt_util.h"

static uint64_t fnv1a64(const uint8_t* p, uint64_t n) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (uint64_t i = 0; i < n; i++) h = (h ^ p[i]) * UINT64_C(0x100000001b3);
    return h;
}

static void print_name(const char* s, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f || c == '\\' || c == ' ')
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

static void print_line(const memtier_tensor_info_t* t, int with_hash, uint64_t hash) {
    print_name(t->name, t->name_len);
    printf(" %s [", t->dtype);
    for (uint32_t d = 0; d < t->ndim; d++) printf("%s%" PRId64, d ? "," : "", t->shape[d]);
    printf("] %" PRIu64 " %" PRIu64, t->offset, t->nbytes);
    if (with_hash) printf(" %016" PRIx64, hash);
    printf("\n");
}

/* Lists path; hashes[i] gets tensor i's hash when checksum is set (hashes may
 * be NULL). Returns the tensor count, or -1 after printing why it failed. */
static long list_file(memtier_ctx_t* ctx, const char* path, int checksum, uint64_t batch,
                      uint64_t* hashes, size_t max_hashes) {
    memtier_safetensors_t* st = NULL;
    int rc = memtier_safetensors_open(ctx, path, &st);
    if (rc != MEMTIER_OK) {
        fprintf(stderr, "error: %s: %s (%s)\n", path, memtier_strerror(rc), memtier_last_error());
        return -1;
    }
    size_t n = 0;
    mt_check(memtier_safetensors_count(st, &n), "memtier_safetensors_count");
    memtier_tensor_info_t* info = calloc(n ? n : 1, sizeof *info);
    void** dsts = calloc(n ? n : 1, sizeof *dsts);
    int64_t* res = calloc(n ? n : 1, sizeof *res);
    if (info == NULL || dsts == NULL || res == NULL) mt_die("out of memory");
    for (size_t i = 0; i < n; i++) mt_check(memtier_safetensors_get(st, i, &info[i]), "memtier_safetensors_get");
    long ok = (long)n;
    size_t i = 0;
    while (i < n) {
        /* One load_all per batch of tensors whose buffers fit in --batch bytes
         * (a larger tensor alone); the rest of dsts stays NULL (skipped). */
        size_t j = i;
        uint64_t bytes = 0;
        if (checksum) {
            while (j < n && (j == i || bytes + info[j].nbytes <= batch)) {
                dsts[j] = info[j].nbytes ? malloc(info[j].nbytes) : malloc(1);
                if (dsts[j] == NULL) mt_die("out of memory (%" PRIu64 " bytes)", info[j].nbytes);
                bytes += info[j].nbytes;
                j++;
            }
            rc = memtier_safetensors_load_all(st, dsts, res, MEMTIER_TARGET_CPU);
            if (rc != MEMTIER_OK) {
                fprintf(stderr, "error: %s: load_all: %s (%s)\n", path, memtier_strerror(rc), memtier_last_error());
                ok = -1;
            }
        } else {
            j = n;
        }
        for (size_t k = i; k < j; k++) {
            uint64_t h = 0;
            if (checksum && res[k] == (int64_t)info[k].nbytes) h = fnv1a64(dsts[k], info[k].nbytes);
            if (hashes != NULL && k < max_hashes) hashes[k] = h;
            print_line(&info[k], checksum, h);
            free(dsts[k]);
            dsts[k] = NULL;
        }
        i = j;
    }
    const char *key, *value;
    for (size_t m = 0; memtier_safetensors_metadata(st, m, &key, &value) == MEMTIER_OK; m++)
        printf("# %s = %s\n", key, value);
    free(info);
    free(dsts);
    free(res);
    mt_check(memtier_safetensors_close(st), "memtier_safetensors_close");
    return ok;
}

/* The self-test file: tensors back to back, then verified by hash. */
static const char demo_header[] =
    "{\"__metadata__\":{\"format\":\"pt\",\"made_by\":\"safetensors_info\"},"
    "\"embed.weight\":{\"dtype\":\"BF16\",\"shape\":[4,8],\"data_offsets\":[0,64]},"
    "\"norm.scale\":{\"dtype\":\"F8_E4M3\",\"shape\":[0],\"data_offsets\":[64,64]},"
    "\"proj.bias\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[64,76]},"
    "\"proj.weight\":{\"dtype\":\"F32\",\"shape\":[1000,3],\"data_offsets\":[76,12076]}}";
#define DEMO_DATA 12076
static const uint64_t demo_begin[] = {0, 64, 64, 76}, demo_end[] = {64, 64, 76, 12076};

static int self_test(memtier_ctx_t* ctx, uint64_t batch) {
    char path[4096];
    snprintf(path, sizeof path, "%s/memtier_safetensors_info_XXXXXX", mt_tmp_dir());
    int fd = mkstemp(path);
    if (fd < 0) mt_die("mkstemp in %s failed", mt_tmp_dir());
    mt_cleanup_add(path, 0);
    uint8_t* data = malloc(DEMO_DATA);
    if (data == NULL) mt_die("out of memory");
    mt_pfile_fill(data, 0, DEMO_DATA);
    uint8_t len[8];
    uint64_t n = sizeof demo_header - 1;
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(n >> (8 * i));
    if (write(fd, len, 8) != 8 || write(fd, demo_header, n) != (ssize_t)n ||
        write(fd, data, DEMO_DATA) != DEMO_DATA || close(fd) != 0)
        mt_die("writing %s failed", path);
    printf("no FILE given: wrote a %" PRIu64 "-byte safetensors file with 4 tensors and metadata\n",
           8 + n + DEMO_DATA);
    uint64_t hashes[4];
    long got = list_file(ctx, path, 1, batch, hashes, 4);
    int ok = got == 4;
    for (int i = 0; ok && i < 4; i++)
        ok = hashes[i] == fnv1a64(data + demo_begin[i], demo_end[i] - demo_begin[i]);
    free(data);
    printf("%s\n", ok ? "safetensors_info: every tensor's hash matches the bytes written: OK"
                      : "safetensors_info: FAILED (a tensor is missing or its bytes differ)");
    return ok ? 0 : 1;
}

int main(int argc, char** argv) {
    int checksum = 0, help = 0;
    uint64_t batch = 256 * MT_MIB;
    const mt_flag_t flags[] = {
        {"checksum", MT_FLAG_BOOL, &checksum, "load every tensor and print the FNV-1a 64 hash of its bytes"},
        {"batch", MT_FLAG_SIZE, &batch, "buffer bytes per memtier_safetensors_load_all call (default 256M)"},
        {"help", MT_FLAG_BOOL, &help, "this text"},
    };
    const char* pos[1];
    int npos = mt_parse_args(argc, argv, flags, sizeof flags / sizeof flags[0], pos, 1,
                             "usage: safetensors_info [FILE] [--checksum] [--batch=SIZE]\n"
                             "Lists the tensors of a safetensors file: name dtype shape offset nbytes [fnv1a64].\n"
                             "With no FILE, makes a small file and verifies it.\n");
    mt_flag_size_range("batch", batch, 1, UINT64_MAX);
    memtier_ctx_t* ctx = NULL;
    mt_check(memtier_init(NULL, &ctx), "memtier_init");
    int rc;
    if (npos == 0) {
        rc = self_test(ctx, batch);
    } else {
        if (!mt_require_regular(pos[0], NULL)) mt_die("%s: %s", pos[0], strerror(errno));
        rc = list_file(ctx, pos[0], checksum, batch, NULL, 0) < 0 ? 1 : 0;
    }
    mt_check(memtier_finalize(ctx), "memtier_finalize");
    return rc;
}
