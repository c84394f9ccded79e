/* memtier_pread_batch: a batch of positional reads done in C only.
 *
 * It exists for processes forked after libmemtier.so was loaded: their Go
 * runtime is unusable (its threads did not survive fork()), so every other
 * entry point returns MEMTIER_ERR_FORKED there. Nothing here calls into Go,
 * takes a lock the Go runtime may hold, or keeps state between calls; the
 * only library state it touches is the thread's last-error text (a pthread
 * key and malloc, both usable after fork()). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bridge.h"
#include "memtier.h"

/* Ranges read by one preadv at most: a small stack array, well under IOV_MAX. */
#define MT_FD_RUN 64

static int mt_fd_status(int err) {
    switch (err) {
    case EBADF:
    case EINVAL:
    case EFAULT:
    case ESPIPE:
        return MEMTIER_ERR_INVALID_ARG;
    case EISDIR:
        return MEMTIER_ERR_IS_DIR;
    case ENOMEM:
        return MEMTIER_ERR_NOMEM;
    default:
        return MEMTIER_ERR_IO;
    }
}

/* The detail text of a failure, kept by the caller for the lowest-index one. */
typedef struct mt_fd_msg {
    char text[256];
    int len;
} mt_fd_msg_t;

static void mt_fd_note(mt_fd_msg_t* m, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void mt_fd_note(mt_fd_msg_t* m, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(m->text, sizeof m->text, fmt, ap);
    va_end(ap);
    m->len = n < 0 ? 0 : (n < (int)sizeof m->text ? n : (int)sizeof m->text - 1);
}

/* mt_fd_range reads range i in full with pread; on failure it writes the
 * detail to *m and returns the status. */
static int mt_fd_range(mt_fd_msg_t* m, size_t i, int fd, uint64_t off, uint64_t size,
                       unsigned char* dst) {
    uint64_t got = 0;
    while (got < size) {
        ssize_t r = pread(fd, dst + got, (size_t)(size - got), (off_t)(off + got));
        if (r > 0) {
            got += (uint64_t)r;
            continue;
        }
        if (r == 0) {
            mt_fd_note(m,
                       "memtier_pread_batch: element %zu (fd %d, offset %llu, %llu bytes): the file "
                       "ends after %llu of them",
                       i, fd, (unsigned long long)off, (unsigned long long)size,
                       (unsigned long long)got);
            return MEMTIER_ERR_EOF;
        }
        if (errno == EINTR) continue;
        int e = errno;
        mt_fd_note(m, "memtier_pread_batch: element %zu (fd %d, offset %llu, %llu bytes): %s", i, fd,
                   (unsigned long long)off, (unsigned long long)size, strerror(e));
        return mt_fd_status(e);
    }
    return MEMTIER_OK;
}

/* mt_fd_check: MEMTIER_OK when range i's arguments are usable (size > 0). */
static int mt_fd_check(mt_fd_msg_t* m, size_t i, uint64_t off, uint64_t size, const void* dst) {
    const char* why = NULL;
    if (size > (uint64_t)SSIZE_MAX)
        why = "size above SSIZE_MAX";
    else if (off > (uint64_t)INT64_MAX - size)
        why = "offset + size above INT64_MAX";
    else if (dst == NULL)
        why = "dst is NULL with size > 0";
    if (why == NULL) return MEMTIER_OK;
    mt_fd_note(m, "memtier_pread_batch: element %zu (offset %llu, %llu bytes): %s", i,
               (unsigned long long)off, (unsigned long long)size, why);
    return MEMTIER_ERR_INVALID_ARG;
}

/* mt_fd_run reads ranges [i, j) (one descriptor, file bytes back to back,
 * all sizes > 0) with preadv; 1 when all were read in full. A short or
 * failed read returns 0 and the caller redoes the ranges one by one, which
 * finds each one's own result. */
static int mt_fd_run(int fd, const uint64_t* sizes, void* const* dsts, size_t i, size_t j,
                     uint64_t off) {
    struct iovec iov[MT_FD_RUN];
    int cnt = 0;
    for (size_t k = i; k < j; k++) {
        iov[cnt].iov_base = dsts[k];
        iov[cnt].iov_len = (size_t)sizes[k];
        cnt++;
    }
    struct iovec* v = iov;
    while (cnt > 0) {
        ssize_t r = preadv(fd, v, cnt, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        off += (uint64_t)r;
        while (cnt > 0 && (size_t)r >= v->iov_len) {
            r -= (ssize_t)v->iov_len;
            v++;
            cnt--;
        }
        if (cnt > 0 && r > 0) {
            v->iov_base = (unsigned char*)v->iov_base + r;
            v->iov_len -= (size_t)r;
        }
    }
    return 1;
}

int memtier_pread_batch(const int32_t* fds, const uint64_t* offsets, const uint64_t* sizes,
                        void* const* dsts, size_t n, int64_t* results) {
    if (n == 0) return MEMTIER_OK;
    if (fds == NULL || offsets == NULL || sizes == NULL || dsts == NULL || results == NULL) {
        const char* t =
            "memtier_pread_batch: fds, offsets, sizes, dsts and results must not be NULL with n > 0";
        mt_set_error(t, strlen(t));
        return MEMTIER_ERR_INVALID_ARG;
    }
    int first = MEMTIER_OK;
    mt_fd_msg_t first_msg, m;
    first_msg.len = 0;
    size_t i = 0;
    while (i < n) {
        if (sizes[i] == 0) {
            results[i++] = 0;
            continue;
        }
        int st = mt_fd_check(&m, i, offsets[i], sizes[i], dsts[i]);
        size_t j = i + 1;
        if (st == MEMTIER_OK) {
            /* The following ranges that continue range i in the file. */
            uint64_t end = offsets[i] + sizes[i];
            while (j < n && j - i < MT_FD_RUN && fds[j] == fds[i] && offsets[j] == end &&
                   sizes[j] > 0 && mt_fd_check(&m, j, offsets[j], sizes[j], dsts[j]) == MEMTIER_OK) {
                end += sizes[j];
                j++;
            }
            if (j - i > 1 && mt_fd_run(fds[i], sizes, dsts, i, j, offsets[i])) {
                for (size_t k = i; k < j; k++) results[k] = (int64_t)sizes[k];
                i = j;
                continue;
            }
            for (size_t k = i; k < j; k++) {
                st = mt_fd_range(&m, k, fds[k], offsets[k], sizes[k], dsts[k]);
                results[k] = st == MEMTIER_OK ? (int64_t)sizes[k] : st;
                if (st != MEMTIER_OK && first == MEMTIER_OK) {
                    first = st;
                    first_msg = m;
                }
            }
        } else {
            results[i] = st;
            if (first == MEMTIER_OK) {
                first = st;
                first_msg = m;
            }
        }
        i = j;
    }
    if (first != MEMTIER_OK) mt_set_error(first_msg.text, (size_t)first_msg.len);
    return first;
}
