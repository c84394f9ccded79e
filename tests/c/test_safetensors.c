/*
 * Description: memtier_safetensors_* on files written here. (1) A file with
 * mixed dtypes (BF16, F8_E4M3, I64, F32, U8), a zero-element tensor, a scalar,
 * a name with an escaped NUL ("a\u0000b") and a non-ASCII name, and
 * metadata: count, infos (name, name_len, dtype, bits, shape, absolute offset,
 * nbytes) in data order, find, metadata sorted by key then EOF, load and
 * load_all bytes, dst_size too small (INVALID_ARG, canary intact), index out
 * of range. (2) A metadata-only file. (3) Every rejection of the header
 * comment gives MEMTIER_ERR_FORMAT with a message: field cases B12 (too
 * small, huge length, length past the file, not '{'), B13 (shape vs offsets,
 * overflow, reversed, past end), B15e, unknown dtypes, packed sub-byte sizes
 * that are not whole bytes, overlap,
 * gap, duplicates, bad metadata, trailing bytes, bad JSON and UTF-8. (4) B11:
 * a file rewritten in place or replaced after open: load gives
 * MEMTIER_ERR_IO, never the other file's bytes; reopening reads the new
 * version. (5) B15: zero-element tensors load, dst NULL for 0 bytes is OK.
 * (6) Handles: close(NULL), close twice, use after close, after finalize;
 * open errors.
 */
#include "mt_test.h"

/* Writes an 8-byte little-endian length, the header, then data. */
static void write_raw(const char* path, uint64_t n, const char* hdr, size_t hdr_len,
                      const void* data, size_t data_len) {
    FILE* f = fopen(path, "wb");
    uint8_t len[8];
    int i;
    MT_CHECK(f != NULL, "create %s", path);
    for (i = 0; i < 8; i++) len[i] = (uint8_t)(n >> (8 * i));
    MT_CHECK(fwrite(len, 1, 8, f) == 8, "write");
    if (hdr_len) MT_CHECK(fwrite(hdr, 1, hdr_len, f) == hdr_len, "write");
    if (data_len) MT_CHECK(fwrite(data, 1, data_len, f) == data_len, "write");
    MT_CHECK(fclose(f) == 0, "close");
}

static void write_st(const char* path, const char* hdr, const void* data, size_t data_len) {
    write_raw(path, strlen(hdr), hdr, strlen(hdr), data, data_len);
}

/* Replaces path atomically (rename over it: a new inode). */
static void replace_st(const char* path, const char* hdr, const void* data, size_t data_len) {
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    write_st(tmp, hdr, data, data_len);
    MT_CHECK(rename(tmp, path) == 0, "rename: %s", strerror(errno));
}

static memtier_safetensors_t* open_ok(memtier_ctx_t* ctx, const char* path) {
    memtier_safetensors_t* st = NULL;
    MT_OK(memtier_safetensors_open(ctx, path, &st));
    MT_CHECK(st != NULL, "open returned OK with NULL");
    return st;
}

static const char MIXED[] =
    "{\"__metadata__\":{\"zeta\":\"last\",\"alpha\":\"first\",\"mid\":\"\\u00e9\"},"
    "\"w.bf16\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
    "\"f8\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[12,16]},"
    "\"a\\u0000b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[16,24]},"
    "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[16,16]},"
    "\"\\u00fc\\u540d\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]},"
    "\"scalar\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[32,33]}}";

struct want {
    const char* name;
    size_t name_len;
    const char* dtype;
    uint32_t bits, ndim;
    int64_t shape[2];
    uint64_t begin, nbytes;
};

static void test_mixed(memtier_ctx_t* ctx) {
    static const struct want w[] = {
        {"w.bf16", 6, "BF16", 16, 2, {2, 3}, 0, 12},
        {"f8", 2, "F8_E4M3", 8, 1, {4, 0}, 12, 4},
        {"empty", 5, "F32", 32, 2, {0, 5}, 16, 0},
        {"a\0b", 3, "I64", 64, 1, {1, 0}, 16, 8},
        {"\xc3\xbc\xe5\x90\x8d", 5, "F32", 32, 1, {2, 0}, 24, 8},
        {"scalar", 6, "U8", 8, 0, {0, 0}, 32, 1},
    };
    const size_t nt = sizeof w / sizeof w[0];
    const char* path = mt_path("mixed.safetensors");
    const uint64_t data_start = 8 + strlen(MIXED);
    uint8_t data[33], buf[64];
    size_t i, count = 0, idx = 99;
    memtier_tensor_info_t info;
    for (i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7 + 1);
    write_st(path, MIXED, data, sizeof data);
    memtier_safetensors_t* st = open_ok(ctx, path);
    MT_OK(memtier_safetensors_count(st, &count));
    MT_EQ_U64(count, nt, "tensor count");
    for (i = 0; i < nt; i++) {
        uint32_t d;
        MT_OK(memtier_safetensors_get(st, i, &info));
        MT_CHECK(info.name_len == w[i].name_len && memcmp(info.name, w[i].name, w[i].name_len) == 0 &&
                     info.name[info.name_len] == '\0',
                 "tensor %zu: name (len %llu) differs from %s", i, (unsigned long long)info.name_len, w[i].name);
        MT_CHECK(strcmp(info.dtype, w[i].dtype) == 0, "tensor %zu: dtype %s, want %s", i, info.dtype, w[i].dtype);
        MT_EQ_U64(info.dtype_bits, w[i].bits, "dtype_bits");
        MT_EQ_U64(info.ndim, w[i].ndim, "ndim");
        for (d = 0; d < info.ndim; d++) MT_EQ_U64(info.shape[d], w[i].shape[d], "shape");
        MT_EQ_U64(info.offset, data_start + w[i].begin, "absolute offset");
        MT_EQ_U64(info.nbytes, w[i].nbytes, "nbytes");
        MT_OK(memtier_safetensors_find(st, w[i].name, w[i].name_len, &idx));
        MT_EQ_U64(idx, i, "find");
        memset(buf, 0xAA, sizeof buf);
        MT_OK(memtier_safetensors_load(st, i, w[i].nbytes ? buf : NULL, w[i].nbytes, MEMTIER_TARGET_CPU));
        MT_CHECK(memcmp(buf, data + w[i].begin, w[i].nbytes) == 0, "tensor %zu: bytes differ", i);
        MT_CHECK(mt_find_not(buf + w[i].nbytes, 0xAA, sizeof buf - w[i].nbytes) < 0, "tensor %zu: wrote past", i);
        if (w[i].nbytes > 0) { /* dst_size one short: nothing written */
            memset(buf, 0xAA, sizeof buf);
            MT_STATUS(memtier_safetensors_load(st, i, buf, w[i].nbytes - 1, MEMTIER_TARGET_CPU),
                      MEMTIER_ERR_INVALID_ARG);
            MT_CHECK(mt_find_not(buf, 0xAA, sizeof buf) < 0, "tensor %zu: short dst written", i);
            MT_STATUS(memtier_safetensors_load(st, i, NULL, w[i].nbytes, MEMTIER_TARGET_CPU),
                      MEMTIER_ERR_INVALID_ARG);
        }
    }
    MT_STATUS(memtier_safetensors_find(st, "a", 1, &idx), MEMTIER_ERR_NOT_FOUND);
    MT_STATUS(memtier_safetensors_find(st, "a\0b", 2, &idx), MEMTIER_ERR_NOT_FOUND);
    MT_STATUS(memtier_safetensors_get(st, nt, &info), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_safetensors_load(st, nt, buf, sizeof buf, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    {
        static const char* keys[] = {"alpha", "mid", "zeta"};
        static const char* vals[] = {"first", "\xc3\xa9", "last"};
        const char *k, *v;
        for (i = 0; i < 3; i++) {
            MT_OK(memtier_safetensors_metadata(st, i, &k, &v));
            MT_CHECK(strcmp(k, keys[i]) == 0 && strcmp(v, vals[i]) == 0, "metadata %zu: %s=%s", i, k, v);
        }
        MT_STATUS(memtier_safetensors_metadata(st, 3, &k, &v), MEMTIER_ERR_EOF);
        MT_STATUS(memtier_safetensors_metadata(st, 0, NULL, &v), MEMTIER_ERR_INVALID_ARG);
    }
    {
        /* load_all: tensors 1 and 3 skipped (NULL). */
        uint8_t out[6][16];
        void* dsts[6];
        int64_t res[6];
        memset(out, 0xAA, sizeof out);
        for (i = 0; i < nt; i++) dsts[i] = (i == 1 || i == 3) ? NULL : out[i];
        MT_OK(memtier_safetensors_load_all(st, dsts, res, MEMTIER_TARGET_CPU));
        for (i = 0; i < nt; i++) {
            int skipped = i == 1 || i == 3;
            MT_EQ_U64(res[i], skipped ? 0 : w[i].nbytes, "load_all result");
            if (skipped) {
                MT_CHECK(mt_find_not(out[i], 0xAA, 16) < 0, "skipped tensor %zu written", i);
            } else {
                MT_CHECK(memcmp(out[i], data + w[i].begin, w[i].nbytes) == 0, "load_all tensor %zu bytes", i);
                MT_CHECK(mt_find_not(out[i] + w[i].nbytes, 0xAA, 16 - w[i].nbytes) < 0, "past tensor %zu", i);
            }
        }
        MT_OK(memtier_safetensors_load_all(st, dsts, NULL, MEMTIER_TARGET_CPU));
        MT_STATUS(memtier_safetensors_load_all(st, NULL, res, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    }
    MT_OK(memtier_safetensors_close(st));
}

static void test_metadata_only(memtier_ctx_t* ctx) {
    const char* path = mt_path("meta.safetensors");
    const char *k, *v;
    size_t count = 9;
    write_st(path, "{\"__metadata__\":{\"format\":\"pt\"}}  ", NULL, 0);
    memtier_safetensors_t* st = open_ok(ctx, path);
    MT_OK(memtier_safetensors_count(st, &count));
    MT_EQ_U64(count, 0, "no tensors");
    MT_OK(memtier_safetensors_metadata(st, 0, &k, &v));
    MT_CHECK(strcmp(k, "format") == 0 && strcmp(v, "pt") == 0, "metadata %s=%s", k, v);
    MT_STATUS(memtier_safetensors_metadata(st, 1, &k, &v), MEMTIER_ERR_EOF);
    MT_OK(memtier_safetensors_load_all(st, NULL, NULL, MEMTIER_TARGET_CPU));
    MT_OK(memtier_safetensors_close(st));
    write_st(path, "{}", NULL, 0);
    st = open_ok(ctx, path);
    MT_STATUS(memtier_safetensors_metadata(st, 0, &k, &v), MEMTIER_ERR_EOF);
    MT_OK(memtier_safetensors_close(st));
}

/* Field case N01: "__metadata__": {} is present with 0 entries, a missing or
 * null one is absent (as the reference safetensors tells {} from None). */
static void test_metadata_count(memtier_ctx_t* ctx) {
    static const struct {
        const char* hdr;
        size_t count;
        int present;
    } cases[] = {
        {"{}", 0, 0},
        {"{\"__metadata__\":null}", 0, 0},
        {"{\"__metadata__\":{}}", 0, 1},
        {"{\"__metadata__\":{\"format\":\"pt\",\"a\":\"b\"}}", 2, 1},
        {"{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},\"__metadata__\":{}}", 0, 1},
    };
    const char* path = mt_path("meta_count.safetensors");
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t count = 99;
        int present = 7;
        int has_tensor = strstr(cases[i].hdr, "\"t\"") != NULL;
        write_st(path, cases[i].hdr, has_tensor ? "z" : NULL, has_tensor ? 1 : 0);
        memtier_safetensors_t* st = open_ok(ctx, path);
        MT_OK(memtier_safetensors_metadata_count(st, &count, &present));
        MT_EQ_U64(count, cases[i].count, cases[i].hdr);
        MT_EQ_U64((uint64_t)present, (uint64_t)cases[i].present, cases[i].hdr);
        count = 99;
        MT_OK(memtier_safetensors_metadata_count(st, &count, NULL));
        MT_EQ_U64(count, cases[i].count, "present_out NULL");
        MT_STATUS(memtier_safetensors_metadata_count(st, NULL, &present), MEMTIER_ERR_INVALID_ARG);
        MT_CHECK(strcmp(memtier_last_error(), "memtier_safetensors_metadata_count: st or count_out is NULL") == 0,
                 "last_error %s", memtier_last_error());
        MT_OK(memtier_safetensors_close(st));
        MT_STATUS(memtier_safetensors_metadata_count(st, &count, &present), MEMTIER_ERR_CLOSED);
    }
    MT_STATUS(memtier_safetensors_metadata_count(NULL, NULL, NULL), MEMTIER_ERR_INVALID_ARG);
}

static void expect_format(memtier_ctx_t* ctx, const char* what, const char* path) {
    memtier_safetensors_t* st = (memtier_safetensors_t*)1;
    int rc = memtier_safetensors_open(ctx, path, &st);
    if (rc != MEMTIER_ERR_FORMAT)
        MT_FAIL("%s: open returned %d (%s), want MEMTIER_ERR_FORMAT; last_error: %s", what, rc,
                memtier_strerror(rc), memtier_last_error());
    MT_CHECK(st == NULL, "%s: st_out not NULL after a failure", what);
    MT_CHECK(strlen(memtier_last_error()) > 0, "%s: empty last_error", what);
    printf("  %-28s %s\n", what, memtier_last_error());
}

static void reject(memtier_ctx_t* ctx, const char* what, const char* hdr, size_t data_len) {
    static const uint8_t zeros[64];
    const char* path = mt_path("bad.safetensors");
    MT_CHECK(data_len <= sizeof zeros, "test data too long");
    write_st(path, hdr, zeros, data_len);
    expect_format(ctx, what, path);
}

static void test_rejections(memtier_ctx_t* ctx) {
    const char* path = mt_path("bad.safetensors");
    static const uint8_t zeros[64];
    FILE* f;
    /* B12 (a): 5 bytes; 7 bytes. */
    f = fopen(path, "wb");
    fputs("abcde", f);
    fclose(f);
    expect_format(ctx, "B12a 5-byte file", path);
    f = fopen(path, "wb");
    fputs("abcdefg", f);
    fclose(f);
    expect_format(ctx, "7-byte file", path);
    /* B12 (b): a zip checkpoint; (c) N = 100,000,001 + "{}"; (d) N = 64 in 28 bytes. */
    f = fopen(path, "wb");
    fputs("PK\x03\x04", f);
    fwrite(zeros, 1, 60, f);
    fclose(f);
    expect_format(ctx, "B12b zip magic", path);
    write_raw(path, 100000001, "{}", 2, NULL, 0);
    expect_format(ctx, "B12c N over 100,000,000", path);
    write_raw(path, 64, "{\"a\":1}", 7, zeros, 13);
    expect_format(ctx, "B12d N past the file", path);
    /* B12 (e): "[]", two spaces, N = 0. */
    write_raw(path, 2, "[]", 2, NULL, 0);
    expect_format(ctx, "B12e header []", path);
    write_raw(path, 2, "  ", 2, NULL, 0);
    expect_format(ctx, "B12e two spaces", path);
    write_raw(path, 0, NULL, 0, NULL, 0);
    expect_format(ctx, "B12e N = 0", path);
    /* B13. */
    reject(ctx, "B13a 1000x1000 in 4 bytes", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1000,1000],\"data_offsets\":[0,4]}}", 4);
    reject(ctx, "B13b [2,2] in 20 bytes", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,20]}}", 20);
    reject(ctx, "B13c overflowing shape",
           "{\"t\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,16]}}", 16);
    reject(ctx, "B13d reversed offsets", "{\"t\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,4]}}", 8);
    reject(ctx, "B13d past the end", "{\"t\":{\"dtype\":\"U8\",\"shape\":[4000000],\"data_offsets\":[0,4000000]}}", 4);
    reject(ctx, "B15e [1] in 0 bytes", "{\"bad\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,0]}}", 0);
    reject(ctx, "negative shape", "{\"t\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1);
    reject(ctx, "unknown dtype", "{\"t\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    reject(ctx, "F4 x 3: 12 bits", "{\"t\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2);
    reject(ctx, "F6_E2M3 x 2: 12 bits", "{\"t\":{\"dtype\":\"F6_E2M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2);
    reject(ctx, "overlapping tensors",
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}", 6);
    reject(ctx, "gap between tensors",
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
           "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]}}", 6);
    reject(ctx, "duplicate names",
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
           "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2);
    reject(ctx, "metadata not strings", "{\"__metadata__\":{\"k\":1}}", 0);
    reject(ctx, "trailing data", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 2);
    reject(ctx, "invalid JSON", "{\"t\":{\"dtype\":\"U8\",}}", 0);
    reject(ctx, "invalid UTF-8", "{\"\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
}

/* File timestamps can be coarse (a clock tick); let one pass between versions. */
static void tick(void) { usleep(50 * 1000); }

/* B11: the handle's file changes after open. */
/* The packed sub-byte dtypes open as safetensors 0.8 reads them: F4 [2, 4] is
 * 8 values in 4 bytes, F6_E3M2 [4] is 3 bytes, with dtype_bits 4 and 6. */
static void test_subbyte(memtier_ctx_t* ctx) {
    static const uint8_t data[7] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde};
    const char* path = mt_path("subbyte.safetensors");
    memtier_safetensors_t* st = NULL;
    memtier_tensor_info_t info;
    uint8_t buf[8];
    write_st(path,
             "{\"a\":{\"dtype\":\"F4\",\"shape\":[2,4],\"data_offsets\":[0,4]},"
             "\"b\":{\"dtype\":\"F6_E3M2\",\"shape\":[4],\"data_offsets\":[4,7]}}",
             data, sizeof data);
    MT_OK(memtier_safetensors_open(ctx, path, &st));
    MT_OK(memtier_safetensors_get(st, 0, &info));
    MT_CHECK(strcmp(info.dtype, "F4") == 0, "dtype %s", info.dtype);
    MT_EQ_U64(info.dtype_bits, 4, "F4 dtype_bits");
    MT_EQ_U64(info.nbytes, 4, "F4 nbytes");
    MT_OK(memtier_safetensors_load(st, 0, buf, 4, MEMTIER_TARGET_CPU));
    MT_CHECK(memcmp(buf, data, 4) == 0, "F4 bytes differ");
    MT_OK(memtier_safetensors_get(st, 1, &info));
    MT_EQ_U64(info.dtype_bits, 6, "F6_E3M2 dtype_bits");
    MT_EQ_U64(info.nbytes, 3, "F6_E3M2 nbytes");
    MT_OK(memtier_safetensors_load(st, 1, buf, 3, MEMTIER_TARGET_CPU));
    MT_CHECK(memcmp(buf, data + 4, 3) == 0, "F6 bytes differ");
    MT_OK(memtier_safetensors_close(st));
}

static void test_changed(memtier_ctx_t* ctx) {
    const char* path = mt_path("b11.safetensors");
    const char* hdr = "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}";
    const char* hdr2 =
        "{\"__metadata__\":{\"note\":\"a longer header shifts the data start\"},"
        "\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}";
    float v1[4] = {1, 2, 3, 4}, v2[4] = {5, 6, 7, 8}, zero[4] = {0, 0, 0, 0}, t[4];
    memtier_tensor_info_t info;
    memtier_safetensors_t *st, *st2;
    int fd;
    replace_st(path, hdr, v1, sizeof v1);
    st = open_ok(ctx, path);
    MT_OK(memtier_safetensors_load(st, 0, t, sizeof t, MEMTIER_TARGET_CPU));
    MT_CHECK(memcmp(t, v1, sizeof t) == 0, "first load");
    /* (b) zeros written over the data in place. */
    MT_OK(memtier_safetensors_get(st, 0, &info));
    tick();
    fd = open(path, O_WRONLY);
    MT_CHECK(fd >= 0 && pwrite(fd, zero, sizeof zero, (off_t)info.offset) == (ssize_t)sizeof zero, "overwrite");
    close(fd);
    MT_CHECK(memcmp(t, v1, sizeof t) == 0, "the loaded tensor changed: it must own its memory");
    memcpy(t, v1, sizeof t);
    MT_STATUS(memtier_safetensors_load(st, 0, t, sizeof t, MEMTIER_TARGET_CPU), MEMTIER_ERR_IO);
    MT_CHECK(strstr(memtier_last_error(), "changed since open") != NULL, "message: %s", memtier_last_error());
    st2 = open_ok(ctx, path);
    MT_OK(memtier_safetensors_load(st2, 0, t, sizeof t, MEMTIER_TARGET_CPU));
    MT_CHECK(memcmp(t, zero, sizeof t) == 0, "reopened file: zeros");
    /* (c) atomically replaced by a version with a longer header and w = 5..8. */
    tick();
    replace_st(path, hdr2, v2, sizeof v2);
    memcpy(t, v1, sizeof t);
    MT_STATUS(memtier_safetensors_load(st2, 0, t, sizeof t, MEMTIER_TARGET_CPU), MEMTIER_ERR_IO);
    MT_CHECK(memcmp(t, v1, sizeof t) == 0, "a load after replacement wrote bytes");
    {
        void* d[1] = {t};
        int64_t r[1] = {0};
        MT_STATUS(memtier_safetensors_load_all(st2, d, r, MEMTIER_TARGET_CPU), MEMTIER_ERR_IO);
        MT_CHECK(r[0] == MEMTIER_ERR_IO, "load_all result %lld", (long long)r[0]);
    }
    MT_OK(memtier_safetensors_close(st2));
    st2 = open_ok(ctx, path);
    MT_OK(memtier_safetensors_load(st2, 0, t, sizeof t, MEMTIER_TARGET_CPU));
    MT_CHECK(memcmp(t, v2, sizeof t) == 0, "the new version: 5..8");
    /* Truncated to nothing: the old handles fail cleanly. */
    tick();
    MT_CHECK(truncate(path, 0) == 0, "truncate");
    MT_STATUS(memtier_safetensors_load(st2, 0, t, sizeof t, MEMTIER_TARGET_CPU), MEMTIER_ERR_IO);
    MT_OK(memtier_safetensors_close(st));
    MT_OK(memtier_safetensors_close(st2));
}

/* B15 (d): zero-element tensors beside a real one. */
static void test_zero_size(memtier_ctx_t* ctx) {
    const char* path = mt_path("b15.safetensors");
    const float one = 1.0f;
    float x = 0;
    size_t i, idx;
    memtier_tensor_info_t info;
    write_st(path,
             "{\"scale\":{\"dtype\":\"F8_E4M3\",\"shape\":[0],\"data_offsets\":[0,0]},"
             "\"empty2d\":{\"dtype\":\"F32\",\"shape\":[2,0],\"data_offsets\":[0,0]},"
             "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
             &one, sizeof one);
    memtier_safetensors_t* st = open_ok(ctx, path);
    MT_OK(memtier_safetensors_find(st, "scale", 5, &idx));
    MT_OK(memtier_safetensors_get(st, idx, &info));
    MT_CHECK(info.ndim == 1 && info.shape[0] == 0 && info.nbytes == 0, "scale shape (0,)");
    for (i = 0; i < 3; i++) {
        MT_OK(memtier_safetensors_get(st, i, &info));
        if (info.nbytes == 0) MT_OK(memtier_safetensors_load(st, i, NULL, 0, MEMTIER_TARGET_CPU));
    }
    MT_OK(memtier_safetensors_find(st, "x", 1, &idx));
    MT_OK(memtier_safetensors_load(st, idx, &x, sizeof x, MEMTIER_TARGET_CPU));
    MT_CHECK(x == 1.0f, "x = %g", (double)x);
    MT_OK(memtier_safetensors_close(st));
}

static void test_handles(void) {
    const char* path = mt_path("h.safetensors");
    size_t count;
    memtier_safetensors_t* st = NULL;
    write_st(path, "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "z", 1);
    memtier_ctx_t* ctx = mt_init_cfg(NULL);
    MT_OK(memtier_safetensors_close(NULL));
    st = open_ok(ctx, path);
    MT_OK(memtier_safetensors_close(st));
    MT_STATUS(memtier_safetensors_close(st), MEMTIER_ERR_CLOSED);
    MT_STATUS(memtier_safetensors_count(st, &count), MEMTIER_ERR_CLOSED);
    MT_STATUS(memtier_safetensors_count(NULL, &count), MEMTIER_ERR_INVALID_ARG);
    st = open_ok(ctx, path);
    MT_STATUS(memtier_safetensors_count(st, NULL), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_safetensors_open(ctx, mt_path("nope.safetensors"), &st), MEMTIER_ERR_NOT_FOUND);
    MT_CHECK(st == NULL, "st_out not NULL after NOT_FOUND");
    MT_STATUS(memtier_safetensors_open(ctx, mt_tmpdir(), &st), MEMTIER_ERR_IS_DIR);
    MT_STATUS(memtier_safetensors_open(ctx, NULL, &st), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_safetensors_open(ctx, path, NULL), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_safetensors_open(NULL, path, &st), MEMTIER_ERR_INVALID_ARG);
    st = open_ok(ctx, path);
    MT_OK(memtier_finalize(ctx));
    /* Finalize closed the handle: every use, close included, is CLOSED. */
    MT_STATUS(memtier_safetensors_count(st, &count), MEMTIER_ERR_CLOSED);
    MT_STATUS(memtier_safetensors_close(st), MEMTIER_ERR_CLOSED);
}

int main(void) {
    mt_begin("test_safetensors");
    memtier_ctx_t* ctx = mt_init_cfg(NULL);
    test_mixed(ctx);
    test_metadata_only(ctx);
    test_metadata_count(ctx);
    test_rejections(ctx);
    test_subbyte(ctx);
    test_changed(ctx);
    test_zero_size(ctx);
    MT_OK(memtier_finalize(ctx));
    test_handles();
    mt_pass();
    return 0;
}
