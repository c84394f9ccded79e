/* memtier._fast: the compiled fast path of the Python package's hottest calls.
 *
 * Built by cffi in API (out-of-line) mode from python/fast/build.py; the text
 * below is the module's set_source() preamble. It does not link libmemtier.so:
 * memtier._fastpath hands it the addresses of memtier_read_ex, memtier_readv
 * and memtier_readv_ex of the library the ABI-mode loader (memtier._ffi)
 * already opened, so both modes call the same loaded library, and
 * MEMTIER_LIBRARY, the packaged copy and the fork rules work unchanged.
 *
 * mtf_bind() also adds METH_FASTCALL functions to the module: read_into,
 * read, readv, ranges_total, set_path_cache and bind_context (which makes
 * Context.read_into a method of this module: see there). They take Python objects
 * (buffers through the buffer protocol, numpy (N, 2) arrays through theirs), so a call
 * costs no cffi argument conversion, no ffi.from_buffer cdata and no numpy
 * temporaries. Each one *declines* (returns None, with no exception set and
 * nothing read) when anything is unusual: a wrong type, a negative or huge
 * value, a read-only, non-contiguous or object-holding buffer, a request
 * above the batch limit. The Python caller then takes its general path,
 * which raises the precise error or handles the case, so errors are the
 * same in both modes by construction.
 *
 * The GIL is released around every library call: a DRAM-cache hit never
 * blocks, but whether a call is a hit is known only inside it, and a miss may
 * wait on a disk or a network for milliseconds.
 */

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "memtier.h"

#define MTF_API_VERSION 4

typedef __typeof__(memtier_read_ex) mtf_read_ex_fn;
typedef __typeof__(memtier_readv) mtf_readv_fn;
typedef __typeof__(memtier_readv_ex) mtf_readv_ex_fn;

static mtf_read_ex_fn* mtf_read_ex;
static mtf_readv_fn* mtf_readv;
static mtf_readv_ex_fn* mtf_readv_ex; /* NULL: a library older than 0.3 */
static uint64_t mtf_chunk;            /* CHUNK_BYTES: larger requests decline */
/* memtier._paths._PATH_CACHE (str/bytes path -> encoded bytes), set by
 * set_path_cache(); NULL: read_into declines. */
static PyObject* mtf_path_cache;
/* This process: set at bind, reset in a fork child (pthread_atfork), so a
 * handle made in the parent (its pid passed in) declines in the child and the
 * Python caller raises ForkError. */
static long mtf_pid;

static void mtf_after_fork_child(void) { mtf_pid = (long)getpid(); }

/* memtier_readv's element limit (include/memtier.h: n above 2^24 is
 * MEMTIER_ERR_INVALID_ARG): such calls decline, and the Python caller's
 * general path reports it. */
#define MTF_READV_MAX (1u << 24)
/* iovec arrays up to this many elements live on the stack. */
#define MTF_STACK_IOV 256

static int mtf_api_version(void) { return MTF_API_VERSION; }

static PyObject* mtf_decline(void) {
    PyErr_Clear();
    Py_RETURN_NONE;
}

/* An unsigned 64-bit integer argument: an int (bool and int subclasses
 * included). Anything else declines (-1, no exception set), so the Python
 * method decides: cffi takes what has __int__ (numpy integers) and refuses
 * what has only __index__, and the compiled path must give the same outcome
 * whether or not the path is in its cache. */
static int mtf_u64(PyObject* o, uint64_t* out) {
    if (!PyLong_Check(o)) return -1;
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = (uint64_t)v;
    return 0;
}

/* The context handle (an int: the memtier_ctx_t* value) and the encoded path
 * (exact bytes, NUL-free: memtier._paths made it). */
static int mtf_ctx_path(PyObject* hid, PyObject* path, memtier_ctx_t** ctx, const char** p) {
    if (!PyLong_CheckExact(hid) || !PyBytes_CheckExact(path)) return -1;
    void* h = PyLong_AsVoidPtr(hid);
    if (h == NULL) return -1;
    char* s = PyBytes_AsString(path);
    if (s == NULL) return -1;
    *ctx = (memtier_ctx_t*)h;
    *p = s;
    return 0;
}

/* A writable C-contiguous host buffer whose items are not Python objects
 * (an "O" item would then hold file bytes as PyObject pointers). */
static int mtf_dest(PyObject* obj, Py_buffer* b) {
    /* A type without the buffer protocol (a torch tensor) declines here: the
     * TypeError PyObject_GetBuffer would format and we would clear costs
     * more than the rest of a declined call. */
    if (PyType_GetSlot(Py_TYPE(obj), Py_bf_getbuffer) == NULL) return -1;
    if (PyObject_GetBuffer(obj, b, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (b->format != NULL && strchr(b->format, 'O') != NULL) {
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

/* An (N, 2) C-contiguous array of native 8-byte integers (int64 or uint64),
 * N >= 1, every value below 2**63, the sizes summing to at most mtf_chunk.
 * Returns 0 with the buffer held, N and the total; -1 otherwise. */
static int mtf_ranges(PyObject* obj, Py_buffer* b, size_t* n, uint64_t* total) {
    if (PyObject_GetBuffer(obj, b, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    const char* f = b->format != NULL ? b->format : "B";
    if (*f == '@' || *f == '=' || *f == '<') f++; /* native order (x86-64, arm64: little) */
    const int ok_fmt = (f[0] == 'q' || f[0] == 'Q' || f[0] == 'l' || f[0] == 'L') && f[1] == 0;
    if (!ok_fmt || b->itemsize != 8 || b->ndim != 2 || b->shape == NULL || b->shape[1] != 2 ||
        b->shape[0] < 1 || (uint64_t)b->shape[0] > MTF_READV_MAX) {
        PyBuffer_Release(b);
        return -1;
    }
    const uint64_t* v = (const uint64_t*)b->buf;
    const size_t rows = (size_t)b->shape[0];
    uint64_t sum = 0;
    for (size_t k = 0; k < rows; k++) {
        const uint64_t off = v[2 * k], size = v[2 * k + 1];
        if ((off | size) >> 63) goto bad; /* negative, or 2**63 or more */
        sum += size;                      /* no wrap: sum <= mtf_chunk before, size < 2**63 */
        if (sum > mtf_chunk) goto bad;
    }
    *n = rows;
    *total = sum;
    return 0;
bad:
    PyBuffer_Release(b);
    return -1;
}

/* mtf_call_path: the shared prologue of read_into and read (7 arguments:
 * hid, pid, path, ..., immutable): the encoded path from the path cache
 * (borrowed), or NULL to decline: another argument count, an immutable that
 * is not a bool, another process, a path not in the cache. */
static PyObject* mtf_call_path(PyObject* const* a, Py_ssize_t na) {
    if (na != 7 || (a[6] != Py_True && a[6] != Py_False) || mtf_path_cache == NULL ||
        !PyLong_CheckExact(a[1]) || PyLong_AsLong(a[1]) != mtf_pid)
        return NULL;
    return PyDict_GetItemWithError(mtf_path_cache, a[2]);
}

/* The body of read_into and of the Context.read_into method: a[] as
 * read_into's arguments below. 1: read, *rc its status, *n its size; 0:
 * declined (no exception set, nothing read). */
static int mtf_read_into_core(PyObject* const* a, int* rc, uint64_t* n) {
    PyObject* path = mtf_call_path(a, 7); /* borrowed */
    if (path == NULL) {
        PyErr_Clear();
        return 0;
    }
    memtier_ctx_t* ctx;
    const char* p;
    uint64_t off, flags;
    if (mtf_ctx_path(a[0], path, &ctx, &p) < 0 || mtf_u64(a[3], &off) < 0 ||
        mtf_u64(a[5], &flags) < 0 || flags > UINT32_MAX) {
        PyErr_Clear();
        return 0;
    }
    if (a[6] == Py_True) flags |= MEMTIER_READ_IMMUTABLE;
    Py_buffer b;
    if (mtf_dest(a[4], &b) < 0) {
        PyErr_Clear();
        return 0;
    }
    *n = (uint64_t)b.len;
    if (*n > mtf_chunk) { /* split into CHUNK_BYTES calls by the Python caller */
        PyBuffer_Release(&b);
        return 0;
    }
    /* Another thread may clear the path cache while the GIL is released:
     * hold the encoded path for the call. */
    Py_INCREF(path);
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = mtf_read_ex(ctx, p, off, *n, b.buf, MEMTIER_TARGET_CPU, (uint32_t)flags);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    PyBuffer_Release(&b);
    *rc = r;
    return 1;
}

/* read_into(hid, pid, path, offset, buffer, flags, immutable)
 *   -> nbytes | status < 0 | None
 * memtier_read_ex of len(buffer) bytes at offset into buffer (target CPU),
 * with MEMTIER_READ_IMMUTABLE added when immutable is True. hid is the
 * context's handle (0: closed), pid the process that made it, path the
 * caller's path, looked up in the path cache (its encoded bytes). None:
 * declined (see the top of this file): also a closed context, another
 * process, a path not in the cache, an immutable that is not a bool. */
static PyObject* mtf_py_read_into(PyObject* self, PyObject* const* a, Py_ssize_t na) {
    (void)self;
    int rc;
    uint64_t n;
    if (na != 7 || !mtf_read_into_core(a, &rc, &n)) Py_RETURN_NONE;
    if (rc != MEMTIER_OK) return PyLong_FromLong(rc);
    return PyLong_FromUnsignedLongLong(n);
}

/* read(hid, pid, path, offset, size, flags, immutable) -> bytes | status < 0 | None
 * memtier_read_ex of size bytes at offset into a new bytes object (written
 * before anyone else holds it). The other arguments and declining as
 * read_into; also a size above CHUNK_BYTES (the caller checks such a range
 * before it allocates). */
static PyObject* mtf_py_read(PyObject* self, PyObject* const* a, Py_ssize_t na) {
    (void)self;
    PyObject* path = mtf_call_path(a, na); /* borrowed */
    if (path == NULL) return mtf_decline();
    memtier_ctx_t* ctx;
    const char* p;
    uint64_t off, size, flags;
    if (mtf_ctx_path(a[0], path, &ctx, &p) < 0 || mtf_u64(a[3], &off) < 0 ||
        mtf_u64(a[4], &size) < 0 || size > mtf_chunk || mtf_u64(a[5], &flags) < 0 ||
        flags > UINT32_MAX)
        return mtf_decline();
    if (a[6] == Py_True) flags |= MEMTIER_READ_IMMUTABLE;
    PyObject* out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (out == NULL) return mtf_decline(); /* the caller's path names the size */
    char* dst = PyBytes_AsString(out);
    Py_INCREF(path); /* as in read_into */
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mtf_read_ex(ctx, p, off, size, dst, MEMTIER_TARGET_CPU, (uint32_t)flags);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    if (rc != MEMTIER_OK) {
        Py_DECREF(out);
        return PyLong_FromLong(rc);
    }
    return out;
}

/* set_path_cache(dict) -> None: the path cache read_into looks paths up in. */
static PyObject* mtf_py_set_path_cache(PyObject* self, PyObject* const* a, Py_ssize_t na) {
    (void)self;
    if (na != 1 || !PyDict_CheckExact(a[0])) {
        PyErr_SetString(PyExc_TypeError, "set_path_cache(dict)");
        return NULL;
    }
    PyObject* old = mtf_path_cache;
    Py_INCREF(a[0]);
    mtf_path_cache = a[0];
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

/* readv(hid, path, ranges, out, flags) -> 0 | (status, index) | None
 * memtier_readv_ex of the (N, 2) ranges into out, range k at the sum of the
 * sizes before it (target CPU). On failure: the status and index of the
 * lowest failed element, or (status, -1) for a call-level failure. */
static PyObject* mtf_py_readv(PyObject* self, PyObject* const* a, Py_ssize_t na) {
    (void)self;
    memtier_ctx_t* ctx;
    const char* p;
    uint64_t flags;
    if (na != 5 || mtf_ctx_path(a[0], a[1], &ctx, &p) < 0 || mtf_u64(a[4], &flags) < 0 ||
        flags > UINT32_MAX || (flags != 0 && mtf_readv_ex == NULL))
        return mtf_decline();
    Py_buffer r, o;
    size_t n;
    uint64_t total;
    if (mtf_ranges(a[2], &r, &n, &total) < 0) return mtf_decline();
    if (mtf_dest(a[3], &o) < 0) {
        PyBuffer_Release(&r);
        return mtf_decline();
    }
    if ((uint64_t)o.len < total) {
        PyBuffer_Release(&o);
        PyBuffer_Release(&r);
        return mtf_decline();
    }
    memtier_iovec_t stack[MTF_STACK_IOV];
    memtier_iovec_t* iov = stack;
    if (n > MTF_STACK_IOV) {
        iov = PyMem_Malloc(n * sizeof *iov);
        if (iov == NULL) {
            PyBuffer_Release(&o);
            PyBuffer_Release(&r);
            return PyErr_NoMemory();
        }
    }
    const uint64_t* v = (const uint64_t*)r.buf;
    char* dst = (char*)o.buf;
    uint64_t pos = 0;
    for (size_t k = 0; k < n; k++) {
        iov[k].offset = v[2 * k];
        iov[k].size = v[2 * k + 1];
        iov[k].dst = dst + pos;
        iov[k].path = NULL;
        iov[k].result = 0;
        pos += v[2 * k + 1];
    }
    PyBuffer_Release(&r);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    if (mtf_readv_ex != NULL)
        rc = mtf_readv_ex(ctx, p, iov, n, MEMTIER_TARGET_CPU, (uint32_t)flags);
    else
        rc = mtf_readv(ctx, p, iov, n, MEMTIER_TARGET_CPU);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&o);
    PyObject* res;
    if (rc == MEMTIER_OK) {
        res = PyLong_FromLong(0);
    } else {
        long st = rc;
        Py_ssize_t idx = -1;
        for (size_t k = 0; k < n; k++) {
            if (iov[k].result < 0) {
                st = (long)iov[k].result;
                idx = (Py_ssize_t)k;
                break;
            }
        }
        res = Py_BuildValue("(ln)", st, idx);
    }
    if (iov != stack) PyMem_Free(iov);
    return res;
}

/* ranges_total(ranges) -> total bytes | None: what readv would read (None:
 * readv would decline these ranges). */
static PyObject* mtf_py_ranges_total(PyObject* self, PyObject* const* a, Py_ssize_t na) {
    (void)self;
    Py_buffer r;
    size_t n;
    uint64_t total;
    if (na != 1 || mtf_ranges(a[0], &r, &n, &total) < 0) return mtf_decline();
    PyBuffer_Release(&r);
    return PyLong_FromUnsignedLongLong(total);
}

/* ---- Context.read_into as a C method ------------------------------------
 *
 * bind_context(cls, fallback) makes cls.read_into a method descriptor of
 * mtf_ctx_read_into. The Python method's frame (its attribute loads, the
 * 7-argument call of read_into above, the result checks) cost about as much as
 * the library call of a cached 4 KiB read. The C method reads the instance's
 * _hid, _pid and _fri slots through their member descriptors (taken once), and
 * passes every call it does not serve -- other arguments, _fri None (a
 * context made in ABI mode), a declined read -- to fallback, the Python
 * method it replaced, with the same arguments: results and errors are that
 * method's by construction. A failed read raises through cls._fail, as the
 * Python method does. */

enum { MTF_HID, MTF_PID, MTF_FRI, MTF_NSLOTS };
static const char* const mtf_slot_names[MTF_NSLOTS] = {"_hid", "_pid", "_fri"};
static PyObject* mtf_ctx_fallback;               /* the Python Context.read_into */
static PyObject* mtf_ctx_slot[MTF_NSLOTS];       /* the slots' member descriptors */
static descrgetfunc mtf_ctx_get[MTF_NSLOTS];     /* their tp_descr_get */
static PyObject *mtf_s_flags, *mtf_s_immutable;  /* keyword names (interned) */
static PyObject *mtf_s_fail, *mtf_s_prefix, *mtf_int0;
static PyMethodDef mtf_ctx_def; /* static: the descriptor keeps a pointer to it */

/* The signature help() and inspect show; the Python method's docstring follows. */
#define MTF_CTX_SIG "read_into($self, /, path, offset, buffer, *, flags=0, immutable=False)\n--\n\n"

/* A new reference to slot k of self, NULL (no exception set) when unset. */
static PyObject* mtf_ctx_slot_get(PyObject* self, int k) {
    PyObject* v = mtf_ctx_get[k](mtf_ctx_slot[k], self, (PyObject*)Py_TYPE(self));
    if (v == NULL) PyErr_Clear();
    return v;
}

static int mtf_kw_is(PyObject* k, PyObject* name) {
    return k == name || PyUnicode_Compare(k, name) == 0;
}

/* The compiled read of the method: 1 with *res set (the byte count, or NULL
 * with the exception of a failed read), 0 to take the fallback. */
static int mtf_ctx_try(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                       PyObject* kwnames, PyObject** res) {
    PyObject* a[7];
    if (nargs != 3) return 0;
    a[5] = mtf_int0;
    a[6] = Py_False;
    const Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_Size(kwnames);
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject* k = PyTuple_GetItem(kwnames, i); /* borrowed */
        if (mtf_kw_is(k, mtf_s_flags))
            a[5] = args[3 + i];
        else if (mtf_kw_is(k, mtf_s_immutable))
            a[6] = args[3 + i];
        else
            return 0; /* the fallback raises the TypeError */
    }
    PyObject* fri = mtf_ctx_slot_get(self, MTF_FRI);
    if (fri == NULL) return 0;
    const int on = fri != Py_None;
    Py_DECREF(fri);
    if (!on) return 0;
    PyObject* hid = mtf_ctx_slot_get(self, MTF_HID);
    if (hid == NULL) return 0;
    PyObject* pid = mtf_ctx_slot_get(self, MTF_PID);
    if (pid == NULL) {
        Py_DECREF(hid);
        return 0;
    }
    a[0] = hid;
    a[1] = pid;
    a[2] = args[0];
    a[3] = args[1];
    a[4] = args[2];
    int rc;
    uint64_t n;
    const int done = mtf_read_into_core(a, &rc, &n);
    Py_DECREF(hid);
    Py_DECREF(pid);
    if (!done) return 0;
    if (rc == MEMTIER_OK) {
        *res = PyLong_FromUnsignedLongLong(n);
        return 1;
    }
    /* Right after the failed call: _fail reads this thread's last error. */
    PyObject* st = PyLong_FromLong(rc);
    if (st == NULL) {
        *res = NULL;
        return 1;
    }
    PyObject* r = PyObject_CallMethodObjArgs(self, mtf_s_fail, st, mtf_s_prefix, args[0], NULL);
    if (r == NULL) {
        Py_DECREF(st);
        *res = NULL;
        return 1;
    }
    Py_DECREF(r); /* _fail returned: the Python method then returns the status */
    *res = st;
    return 1;
}

/* fallback(self, *args, **kwargs) of a vectorcall (the 3.11 stable ABI has no
 * PyObject_Vectorcall). */
static PyObject* mtf_ctx_call_fallback(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                       PyObject* kwnames) {
    PyObject* t = PyTuple_New(nargs + 1);
    if (t == NULL) return NULL;
    Py_INCREF(self);
    PyTuple_SetItem(t, 0, self); /* steals */
    for (Py_ssize_t i = 0; i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SetItem(t, i + 1, args[i]);
    }
    PyObject* kw = NULL;
    const Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_Size(kwnames);
    if (nkw > 0) {
        kw = PyDict_New();
        if (kw == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < nkw; i++) {
            if (PyDict_SetItem(kw, PyTuple_GetItem(kwnames, i), args[nargs + i]) < 0) {
                Py_DECREF(kw);
                Py_DECREF(t);
                return NULL;
            }
        }
    }
    PyObject* r = PyObject_Call(mtf_ctx_fallback, t, kw);
    Py_DECREF(t);
    Py_XDECREF(kw);
    return r;
}

/* Context.read_into(path, offset, buffer, *, flags=0, immutable=False). */
static PyObject* mtf_ctx_read_into(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                   PyObject* kwnames) {
    PyObject* res;
    if (mtf_ctx_try(self, args, nargs, kwnames, &res)) return res;
    return mtf_ctx_call_fallback(self, args, nargs, kwnames);
}

/* MTF_CTX_SIG and the docstring of fn, in memory that is never freed (the
 * method's doc); NULL with an exception set on failure. */
static char* mtf_ctx_doc(PyObject* fn) {
    PyObject* pydoc = PyObject_GetAttrString(fn, "__doc__");
    if (pydoc == NULL) return NULL;
    Py_ssize_t dlen = 0;
    const char* d = PyUnicode_Check(pydoc) ? PyUnicode_AsUTF8AndSize(pydoc, &dlen) : "";
    char* doc = NULL;
    if (d != NULL) {
        const size_t slen = sizeof MTF_CTX_SIG - 1;
        doc = PyMem_Malloc(slen + (size_t)dlen + 1);
        if (doc == NULL) {
            PyErr_NoMemory();
        } else {
            memcpy(doc, MTF_CTX_SIG, slen);
            memcpy(doc + slen, d, (size_t)dlen);
            doc[slen + (size_t)dlen] = 0;
        }
    }
    Py_DECREF(pydoc);
    return doc;
}

/* bind_context(cls, fallback) -> None: make cls.read_into the C method, with
 * fallback (the Python method, whose docstring it takes) for what it does
 * not serve. cls must have the slots _hid, _pid and _fri and a method
 * _fail. Once per process: a later call does nothing. TypeError for a class
 * without those slots (nothing is changed). Not thread-safe: the caller
 * holds a lock. */
static PyObject* mtf_py_bind_context(PyObject* self, PyObject* const* a, Py_ssize_t na) {
    (void)self;
    if (na != 2 || !PyType_Check(a[0]) || !PyCallable_Check(a[1])) {
        PyErr_SetString(PyExc_TypeError, "bind_context(cls, fallback)");
        return NULL;
    }
    if (mtf_ctx_fallback != NULL) Py_RETURN_NONE;
    if (mtf_s_flags == NULL) {
        mtf_s_flags = PyUnicode_InternFromString("flags");
        mtf_s_immutable = PyUnicode_InternFromString("immutable");
        mtf_s_fail = PyUnicode_InternFromString("_fail");
        mtf_s_prefix = PyUnicode_InternFromString("memtier.read_into");
        mtf_int0 = PyLong_FromLong(0);
        if (!mtf_s_flags || !mtf_s_immutable || !mtf_s_fail || !mtf_s_prefix || !mtf_int0)
            return NULL;
    }
    int k = 0;
    for (; k < MTF_NSLOTS; k++) {
        mtf_ctx_slot[k] = PyObject_GetAttrString(a[0], mtf_slot_names[k]); /* the descriptor */
        if (mtf_ctx_slot[k] == NULL) break;
        mtf_ctx_get[k] = (descrgetfunc)PyType_GetSlot(Py_TYPE(mtf_ctx_slot[k]), Py_tp_descr_get);
        if (mtf_ctx_get[k] == NULL) {
            PyErr_Format(PyExc_TypeError, "bind_context: %s is not a slot", mtf_slot_names[k]);
            Py_CLEAR(mtf_ctx_slot[k]);
            break;
        }
    }
    char* doc = k == MTF_NSLOTS ? mtf_ctx_doc(a[1]) : NULL;
    if (doc != NULL) {
        mtf_ctx_def.ml_name = "read_into";
        mtf_ctx_def.ml_meth = (PyCFunction)(void (*)(void))mtf_ctx_read_into;
        mtf_ctx_def.ml_flags = METH_FASTCALL | METH_KEYWORDS;
        mtf_ctx_def.ml_doc = doc;
        PyObject* descr = PyDescr_NewMethod((PyTypeObject*)a[0], &mtf_ctx_def);
        if (descr != NULL) {
            Py_INCREF(a[1]);
            mtf_ctx_fallback = a[1]; /* before the method can be called */
            const int rc = PyObject_SetAttrString(a[0], "read_into", descr);
            Py_DECREF(descr);
            if (rc == 0) Py_RETURN_NONE;
            Py_CLEAR(mtf_ctx_fallback);
        }
        /* doc stays allocated: a descriptor made above may still point at it */
    }
    while (k-- > 0) Py_CLEAR(mtf_ctx_slot[k]);
    return NULL;
}

static PyMethodDef mtf_methods[] = {
    {"read_into", (PyCFunction)(void (*)(void))mtf_py_read_into, METH_FASTCALL,
     "read_into(hid, pid, path, offset, buffer, flags, immutable) -> nbytes, status < 0, or None"},
    {"read", (PyCFunction)(void (*)(void))mtf_py_read, METH_FASTCALL,
     "read(hid, pid, path, offset, size, flags, immutable) -> bytes, status < 0, or None"},
    {"set_path_cache", (PyCFunction)(void (*)(void))mtf_py_set_path_cache, METH_FASTCALL,
     "set_path_cache(dict) -> None: the cache read_into looks paths up in"},
    {"readv", (PyCFunction)(void (*)(void))mtf_py_readv, METH_FASTCALL,
     "readv(hid, path, ranges, out, flags) -> 0, (status, index), or None (declined)"},
    {"ranges_total", (PyCFunction)(void (*)(void))mtf_py_ranges_total, METH_FASTCALL,
     "ranges_total(ranges) -> total bytes of an (N, 2) int64/uint64 array, or None"},
    {"bind_context", (PyCFunction)(void (*)(void))mtf_py_bind_context, METH_FASTCALL,
     "bind_context(cls, fallback) -> None: cls.read_into becomes the C method"},
    {NULL, NULL, 0, NULL},
};

/* mtf_bind: take the library's entry points (addresses of its functions; 0
 * for readv_ex when the library lacks it) and the batch limit, and add the
 * functions above to the module named mod (once). 0 on success, -1 when
 * read_ex or readv is 0 or the module cannot be found. cffi releases the GIL
 * around this call; the module edit takes it back. */
static int mtf_bind(const char* mod, uintptr_t read_ex, uintptr_t readv, uintptr_t readv_ex,
                    uint64_t chunk_bytes) {
    if (read_ex == 0 || readv == 0 || chunk_bytes == 0) return -1;
    mtf_read_ex = (mtf_read_ex_fn*)read_ex;
    mtf_readv = (mtf_readv_fn*)readv;
    mtf_readv_ex = (mtf_readv_ex_fn*)readv_ex;
    mtf_chunk = chunk_bytes;
    static int atfork_done;
    mtf_pid = (long)getpid();
    if (!atfork_done) {
        if (pthread_atfork(NULL, NULL, mtf_after_fork_child) != 0) return -1;
        atfork_done = 1;
    }
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = -1;
    PyObject* m = PyImport_ImportModule(mod); /* imported already: a sys.modules lookup */
    if (m != NULL) {
        if (PyObject_HasAttrString(m, "read_into"))
            rc = 0;
        else
            rc = PyModule_AddFunctions(m, mtf_methods);
        Py_DECREF(m);
    }
    if (rc != 0) PyErr_Clear();
    PyGILState_Release(g);
    return rc;
}
