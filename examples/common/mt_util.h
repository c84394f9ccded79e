/*
 * mt_util.h: helpers shared by MemTier's C examples and benchmarks.
 *
 * Nothing here is part of MemTier's API; it uses only memtier.h and libc.
 *
 * Experiment pattern ("the pattern"). Experiment files made by
 * prepare_experiment_files and the benchmarks hold little-endian uint64 words;
 * word k (k = byte offset / 8) is
 *
 *     splitmix64(0x4D656D5469657221 ^ k)
 *
 * where splitmix64(x) is the output of the SplitMix64 generator whose state is
 * x before the step:
 *
 *     z = x + 0x9E3779B97F4A7C15
 *     z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
 *     z = (z ^ (z >> 27)) * 0x94D049BB133111EB
 *     return z ^ (z >> 31)
 *
 * A file whose size is not a multiple of 8 ends with the first bytes of its
 * last word. The byte at offset o is therefore (word(o / 8) >> (8 * (o % 8))) & 0xFF.
 *
 * P-file (the tests' small-file pattern): byte i = (i * 131 + 7) & 0xFF.
 *
 * Checksum ("mt_checksum", printed as "fnv1a64w"): 64-bit FNV-1a applied to
 * 8-byte little-endian words instead of bytes, then the byte length folded in:
 *
 *     h = 0xCBF29CE484222325
 *     for each 8-byte word w of the data (the last partial word zero-padded):
 *         h = (h ^ w) * 0x100000001B3            (mod 2^64)
 *     h = (h ^ length_in_bytes) * 0x100000001B3
 *
 * The incremental form (mt_checksum_init/update/final) gives the same value
 * whatever the chunking.
 */
#ifndef MT_UTIL_H
#define MT_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "memtier.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MT_KIB (UINT64_C(1) << 10)
#define MT_MIB (UINT64_C(1) << 20)
#define MT_GIB (UINT64_C(1) << 30)

/* The default directory of experiment files: the GDS-capable mount of the
 * machine the experiments were first run on; prepare_experiment_files falls
 * back to ./memtier_experiments when it is not writable (--dir or
 * MEMTIER_EXPERIMENT_DIR choose another). */
#define MT_DEFAULT_EXPERIMENT_DIR "/mnt/gds2/cwd_test"

/* ------------------------------------------------------------------ */
/* Experiment pattern                                                  */
/* ------------------------------------------------------------------ */

#define MT_PATTERN_KEY UINT64_C(0x4D656D5469657221)
#define MT_NO_MISMATCH UINT64_MAX

/* mt_splitmix64: one SplitMix64 output for state x (see the top comment). */
uint64_t mt_splitmix64(uint64_t x);

/* mt_pattern_word: word k of the pattern (bytes 8k .. 8k+7, little-endian). */
uint64_t mt_pattern_word(uint64_t k);

/* mt_pattern_fill: writes the n pattern bytes at file offset file_offset
 * (any alignment) to dst. */
void mt_pattern_fill(void* dst, uint64_t file_offset, size_t n);

/* mt_pattern_check: the file offset of the first byte of buf that differs
 * from the pattern at file_offset, or MT_NO_MISMATCH. */
uint64_t mt_pattern_check(const void* buf, uint64_t file_offset, size_t n);

/* ------------------------------------------------------------------ */
/* P-file                                                              */
/* ------------------------------------------------------------------ */

void mt_pfile_fill(void* dst, uint64_t file_offset, size_t n);
uint64_t mt_pfile_check(const void* buf, uint64_t file_offset, size_t n);

/* ------------------------------------------------------------------ */
/* Checksum                                                            */
/* ------------------------------------------------------------------ */

#define MT_CHECKSUM_NAME "fnv1a64w"
#define MT_CHECKSUM_DESC \
    "FNV-1a 64 over little-endian 64-bit words (last word zero-padded), then the byte length"

typedef struct mt_checksum {
    uint64_t h;       /* running hash over whole words           */
    uint64_t length;  /* bytes seen                               */
    uint8_t tail[8];  /* bytes of a word not yet complete         */
    unsigned ntail;
} mt_checksum_t;

void mt_checksum_init(mt_checksum_t* c);
void mt_checksum_update(mt_checksum_t* c, const void* data, size_t n);
uint64_t mt_checksum_final(const mt_checksum_t* c); /* does not change c */
uint64_t mt_checksum(const void* data, size_t n);
/* mt_pattern_checksum: mt_checksum of the first size bytes of the pattern,
 * computed without a file. */
uint64_t mt_pattern_checksum(uint64_t size);

/* ------------------------------------------------------------------ */
/* Files                                                               */
/* ------------------------------------------------------------------ */

typedef enum mt_content { MT_CONTENT_PATTERN = 0, MT_CONTENT_PFILE = 1 } mt_content_t;

/* mt_cleanup_add: unlinks path (rmdir when is_dir) at exit and on SIGINT,
 * SIGTERM, SIGHUP. Paths are removed in reverse order of registration. */
void mt_cleanup_add(const char* path, int is_dir);
/* mt_cleanup_now: removes every registered path now. */
void mt_cleanup_now(void);

/* mt_tmp_dir: $TMPDIR if set and non-empty, else "/tmp". */
const char* mt_tmp_dir(void);

/* mt_abs_path: path made absolute (its directory resolved with realpath; the
 * file itself need not exist) into out. Returns out. */
const char* mt_abs_path(const char* path, char* out, size_t len);

/* mt_file_kind: "a regular file", "a directory", "a FIFO (named pipe)", ... for
 * a st_mode. */
const char* mt_file_kind(unsigned mode);

/* mt_require_regular: stats path (following links). Returns 1 when it is a
 * regular file (*st filled when st != NULL), 0 when it cannot be stat'ed
 * (errno set: ENOENT for a missing file). Anything else (a FIFO, a directory, a
 * device, a socket) is refused: a message on stderr and exit 2. Every path a
 * user gives to an example or benchmark goes through this before it is opened. */
struct stat;
int mt_require_regular(const char* path, struct stat* st);

/* mt_open_file: open(2) with O_NONBLOCK | O_NOCTTY | O_CLOEXEC added, so that a
 * FIFO cannot block the open; then refuses (message, exit 2) anything that is not
 * a regular file and clears O_NONBLOCK. Returns the descriptor, or -1 (errno set)
 * when the open itself fails. */
int mt_open_file(const char* path, int flags, unsigned mode);

/* mt_free_space: statvfs of the directory of path (a file that may not exist):
 * *avail = f_bavail * f_frsize, *margin = the safety margin (the smaller of 1 GiB
 * and 5% of the file system), *total = its size. NULL pointers are skipped.
 * Returns 0 or -1 (errno set). */
int mt_free_space(const char* path, uint64_t* avail, uint64_t* margin, uint64_t* total);

/* mt_require_space: before writing need more bytes into path (created or
 * extended): when need > available - margin, prints the path, the bytes needed
 * and available on stderr and exits 2, having written nothing. When the free
 * space cannot be read (a missing directory) it returns; the open fails later. */
void mt_require_space(const char* path, uint64_t need);

/* mt_require_space_to_grow: mt_require_space for making path (a regular file or
 * missing; anything else exits 2) at least size bytes long: the bytes it lacks. */
void mt_require_space_to_grow(const char* path, uint64_t size);

/* mt_write_content: writes the content bytes [start, size) to fd with
 * 8 MiB pwrite chunks, then fsync. progress != 0 prints a line on stderr
 * every ~5% (label names the file). Returns 0, or -1 with errno set.
 * Low level: callers that create or extend a file use mt_write_file. */
int mt_write_content(int fd, uint64_t start, uint64_t size, mt_content_t content,
                     int progress, const char* label);

/* mt_write_file: mt_write_content of [start, size) to fd (open on path), with
 * progress lines over 256 MiB. how says what the caller did to the file:
 * MT_FILE_CREATED (it did not exist) or MT_FILE_REWRITTEN (its old contents are
 * already gone): the file is removed if the write fails; MT_FILE_EXTENDED: the
 * file is truncated back to start bytes. On a failure (ENOSPC, EIO, ...) it
 * undoes that, says so on stderr and exits 1; SIGINT, SIGTERM and SIGHUP during
 * the write undo it too. Call mt_require_space first. Returns when the bytes are
 * written and synced (fd stays open). */
void mt_write_file(int fd, const char* path, uint64_t start, uint64_t size, mt_content_t content,
                   int how);

/* mt_temp_file: creates a file of size bytes of content in mt_tmp_dir()
 * (name "memtier_<tag>_XXXXXX"), registers it for removal, returns its path
 * (malloc'd; freeing it is optional). Refuses a size the file system cannot
 * hold (mt_require_space: exit 2); exits 1 with a message on other failures. */
char* mt_temp_file(const char* tag, uint64_t size, mt_content_t content);

/* mt_require_temp_space: the free-space check of mt_temp_file(tag, size), alone
 * (to refuse a size before other checks or work). Exits 2 on refusal. */
void mt_require_temp_space(const char* tag, uint64_t size);

/* mt_temp_dir_make: a new directory in mt_tmp_dir(), registered for removal
 * (register files inside it after it so they go first). Exits 1 on failure. */
char* mt_temp_dir_make(const char* tag);

/* mt_file_size: size of path in bytes, or -1 (errno set). */
int64_t mt_file_size(const char* path);

/* mt_ensure_pattern_file: makes path hold at least size bytes of the pattern
 * (for benchmarks given --file). A missing file is created; a shorter one
 * (empty included) is extended when its bytes are the pattern, and rewritten
 * only when overwrite is set (else exits 1 with a message). A file already long
 * enough is left as it is. Anything but a regular file, or a size the file
 * system cannot hold (free space minus the margin of mt_require_space), is
 * refused with exit 2 before anything is written. A failed write removes the
 * file it created or truncates the file it extended back (mt_write_file) and
 * exits 1. Returns MT_FILE_KEPT, MT_FILE_CREATED, MT_FILE_EXTENDED or
 * MT_FILE_REWRITTEN; a file it created, extended or rewrote is reported by one
 * mt_note line naming its absolute path ("note: created /abs/path: ..."). */
#define MT_FILE_KEPT 0
#define MT_FILE_CREATED 1
#define MT_FILE_EXTENDED 2
#define MT_FILE_REWRITTEN 3
int mt_ensure_pattern_file(const char* path, uint64_t size, int overwrite);

/* mt_drop_page_cache: fdatasync + posix_fadvise(POSIX_FADV_DONTNEED) on the
 * whole file. Needs no privileges; the kernel may keep pages that are mapped or
 * dirty. Returns 0 or -1 (errno set). */
int mt_drop_page_cache(const char* path);

/* mt_page_cache_resident: bytes of [0, size of path) in the page cache now
 * (mincore on a mapping), or -1 (errno set). */
int64_t mt_page_cache_resident(const char* path);

/* mt_pread_full: pread until n bytes are read (retries EINTR and short
 * counts). Returns n, fewer at end of file, or -1 (errno set). */
int64_t mt_pread_full(int fd, void* buf, size_t n, uint64_t offset);

/* ------------------------------------------------------------------ */
/* Time, memory                                                        */
/* ------------------------------------------------------------------ */

uint64_t mt_now_ns(void); /* CLOCK_MONOTONIC */
double mt_gbps(uint64_t bytes, double seconds); /* 1 GB = 1e9 bytes */

/* mt_rss_bytes: VmRSS of this process; mt_peak_rss_bytes: VmHWM (peak RSS).
 * 0 if /proc/self/status cannot be read. */
uint64_t mt_rss_bytes(void);
uint64_t mt_peak_rss_bytes(void);
/* mt_peak_rss_reset: resets VmHWM to the current RSS ("5" into
 * /proc/self/clear_refs, Linux >= 4.0). Returns 0 or -1. */
int mt_peak_rss_reset(void);

/* mt_alloc: page-aligned (4096) allocation of n bytes, every page touched so
 * that page faults stay out of timings. Exits 1 on failure, or when n is more
 * than the physical memory (validate flags with mt_require_memory first). */
void* mt_alloc(size_t n);

/* mt_median: median of n doubles (sorts v in place); 0 for n == 0. */
double mt_median(double* v, size_t n);
/* mt_sort_u64: ascending sort. */
void mt_sort_u64(uint64_t* v, size_t n);
/* mt_percentile_u64: the p-th percentile (0..100, nearest rank) of a sorted array. */
uint64_t mt_percentile_u64(const uint64_t* sorted, size_t n, double p);

/* ------------------------------------------------------------------ */
/* Random numbers (fixed seeds, reproducible)                          */
/* ------------------------------------------------------------------ */

typedef struct mt_rng {
    uint64_t s;
} mt_rng_t;
void mt_rng_seed(mt_rng_t* r, uint64_t seed);
uint64_t mt_rng_next(mt_rng_t* r);
uint64_t mt_rng_below(mt_rng_t* r, uint64_t n); /* uniform in [0, n), n > 0 */

/* ------------------------------------------------------------------ */
/* Flags: --name=value, --name (booleans), positionals                 */
/* ------------------------------------------------------------------ */

typedef enum mt_flag_kind {
    MT_FLAG_BOOL,  /* int*: --name sets 1, --name=0/1/true/false */
    MT_FLAG_SIZE,  /* uint64_t*: bytes, K/M/G/T suffixes (powers of 1024) */
    MT_FLAG_INT,   /* long*: decimal integer */
    MT_FLAG_STR    /* const char**: the text after '=' */
} mt_flag_kind_t;

typedef struct mt_flag {
    const char* name; /* without the leading "--" */
    mt_flag_kind_t kind;
    void* value;
    const char* help;
} mt_flag_t;

/* mt_parse_size: "123", "4K", "64MiB", "1G", ... into *out. Returns 0 or -1. */
int mt_parse_size(const char* s, uint64_t* out);

/* mt_parse_flags: parses argv[1..]. Flags set their values; other arguments
 * (and everything after "--") are stored in pos[] (at most max_pos). "-h" is
 * taken as "--help" if a "help" flag exists. Unknown flags, bad values or too
 * many positionals print a message to stderr and return -1. Otherwise returns
 * the number of positionals. */
int mt_parse_flags(int argc, char** argv, const mt_flag_t* flags, size_t nflags,
                   const char** pos, int max_pos);

/* mt_parse_args: mt_parse_flags plus the endings every tool shares: a parse
 * error exits 2; when the bool flag "help" is set, prints usage (a complete
 * text, ending in a newline) and the flag table, then exits 0. Returns the
 * positional count. */
int mt_parse_args(int argc, char** argv, const mt_flag_t* flags, size_t nflags,
                  const char** pos, int maxpos, const char* usage);

/* mt_print_flags: one line per flag ("  --name=SIZE  help"). */
void mt_print_flags(FILE* f, const mt_flag_t* flags, size_t nflags);

/* ------------------------------------------------------------------ */
/* Output                                                              */
/* ------------------------------------------------------------------ */

/* mt_fmt_bytes: "8 MiB", "1.5 GiB", "4096 B" into buf (>= 32 bytes). */
const char* mt_fmt_bytes(char* buf, size_t len, uint64_t n);

/* mt_set_note_stream: where mt_note writes (stdout by default; benchmarks move it
 * to stderr under --json so stdout holds only the JSON object). */
void mt_set_note_stream(FILE* f);
void mt_note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/* mt_die: prints "error: ..." on stderr and exits 1. */
void mt_die(const char* fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Exit status of a usage error: a bad or absurd flag value, a path that is not
 * a regular file, a size the file system cannot hold. */
#define MT_EXIT_USAGE 2

/* mt_usage_die: prints "error: ..." on stderr and exits MT_EXIT_USAGE (2). */
void mt_usage_die(const char* fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* mt_flag_range: exits 2 with a message unless lo <= v <= hi (flag: its name
 * without "--"). mt_flag_size_range: the same for a SIZE flag. */
void mt_flag_range(const char* flag, long v, long lo, long hi);
void mt_flag_size_range(const char* flag, uint64_t v, uint64_t lo, uint64_t hi);

/* mt_phys_mem_bytes: physical memory of the machine (UINT64_MAX if unknown). */
uint64_t mt_phys_mem_bytes(void);
/* mt_require_memory: exits 2 with a message when bytes (what: which buffer,
 * and which flags set it) exceed the physical memory. */
void mt_require_memory(const char* what, uint64_t bytes);

/* mt_check: if status != MEMTIER_OK prints what, memtier_strerror(status) and
 * memtier_last_error() on stderr and exits 1. */
void mt_check(int status, const char* what);

/* mt_status_name: "MEMTIER_OK (0)", "MEMTIER_ERR_EOF (-4)", ... (static). */
const char* mt_status_name(int status);

/* mt_print_banner: "prog: MemTier <library version>" plus a warning if the
 * library's version differs from the header's. */
void mt_print_banner(const char* prog);

/* mt_stats_print: the non-zero counters of st, several per line. */
void mt_stats_print(FILE* f, const char* indent, const memtier_stats_t* st);

/* mt_stats_sub: *out = *a - *b counter by counter (state fields taken from a). */
void mt_stats_sub(memtier_stats_t* out, const memtier_stats_t* a, const memtier_stats_t* b);

/* Minimal JSON writer: objects and arrays, nesting up to 16 deep. key is NULL
 * inside arrays. Numbers are written as integers or with %.6g. */
typedef struct mt_json {
    FILE* f;
    int depth;
    int count[16];
} mt_json_t;

void mt_json_begin(mt_json_t* j, FILE* f);   /* writes "{"  */
void mt_json_end(mt_json_t* j);              /* writes "}\n" */
void mt_json_obj(mt_json_t* j, const char* key);
void mt_json_obj_end(mt_json_t* j);
void mt_json_arr(mt_json_t* j, const char* key);
void mt_json_arr_end(mt_json_t* j);
void mt_json_str(mt_json_t* j, const char* key, const char* v);
void mt_json_u64(mt_json_t* j, const char* key, uint64_t v);
void mt_json_i64(mt_json_t* j, const char* key, int64_t v);
void mt_json_f64(mt_json_t* j, const char* key, double v); /* NaN/inf -> null */
void mt_json_bool(mt_json_t* j, const char* key, int v);
void mt_json_null(mt_json_t* j, const char* key);
void mt_json_hex(mt_json_t* j, const char* key, uint64_t v); /* "0x%016llx" */
void mt_json_stats(mt_json_t* j, const char* key, const memtier_stats_t* st);

#ifdef __cplusplus
}
#endif

#endif /* MT_UTIL_H */
