"""The Python GPU paths (CUDA target, HBM prefetch, gpu_info, the errors) against
the GPU test double (tests/gpu_double: a fake libcuda.so.1 / libcufile.so.0 over
host memory), so they run on machines without a GPU and without torch.cuda.

Each test runs in a fresh interpreter (``run_py``) whose environment points the
library at the double (MEMTIER_CUDA_LIBRARY / MEMTIER_CUFILE_LIBRARY, read when
the library first initialises CUDA). The child loads the same double with
ctypes to allocate "device" memory (cuMemAlloc_v2) and read it back
(cuMemcpyDtoH_v2), and hands the pointers to memtier as objects exposing
``__cuda_array_interface__``. The double is found in $MEMTIER_GPU_DOUBLE_DIR,
else $MEMTIER_BUILD_DIR/gpu_double (ctest sets MEMTIER_BUILD_DIR for
python_tests; every CMake build with tests builds the double). Every build
has the CUDA and GDS backends (loaded with dlopen at run time).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest

from conftest import REPO

EXIT_SKIP = 77


def _double_dir():
    for d in (os.environ.get("MEMTIER_GPU_DOUBLE_DIR"),
              os.path.join(os.environ["MEMTIER_BUILD_DIR"], "gpu_double")
              if os.environ.get("MEMTIER_BUILD_DIR") else None):
        if d and os.path.isfile(os.path.join(d, "libcuda.so.1")) \
                and os.path.isfile(os.path.join(d, "libcufile.so.0")):
            return os.path.abspath(d)
    return None


GD = _double_dir()
pytestmark = pytest.mark.skipif(
    GD is None,
    reason="GPU test double not found: set MEMTIER_GPU_DOUBLE_DIR, or MEMTIER_BUILD_DIR to a "
    "CMake build dir holding gpu_double/libcuda.so.1 (cmake --build builds it)")

# The child's preamble: the double's driver with a current context, device
# memory helpers, and a skip when the library lacks the CUDA backend.
PRELUDE = r'''
import ctypes, os, sys
import numpy as np
import memtier
from memtier import safetensors as mst

GD = os.environ["MT_GPU_DOUBLE"]

def skip(why):
    print("SKIP:", why)
    sys.exit(77)

INFO = memtier.gpu_info()
if "cuda" not in INFO.split("build_tags:")[1]:
    if os.environ.get("MT_NEED_CUDA_BUILD") == "1":
        skip("libmemtier.so reports no CUDA backend (a CGO_ENABLED=0 build?)")

cu = ctypes.CDLL(os.path.join(GD, "libcuda.so.1"))
def ok(r, what):
    assert r == 0, f"{what}: CUresult {r}"
ok(cu.cuInit(0), "cuInit")
_dev = ctypes.c_int()
ok(cu.cuDeviceGet(ctypes.byref(_dev), 0), "cuDeviceGet")
_ctx = ctypes.c_void_p()
ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(_ctx), _dev), "cuDevicePrimaryCtxRetain")
ok(cu.cuCtxSetCurrent(_ctx), "cuCtxSetCurrent")

def dalloc(n):
    p = ctypes.c_uint64()
    ok(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(max(n, 1))), "cuMemAlloc_v2")
    return p.value

def dfree(p):
    ok(cu.cuMemFree_v2(ctypes.c_uint64(p)), "cuMemFree_v2")

def dread(p, n):
    out = ctypes.create_string_buffer(max(n, 1))
    if n:
        ok(cu.cuMemcpyDtoH_v2(out, ctypes.c_uint64(p), ctypes.c_size_t(n)), "cuMemcpyDtoH_v2")
    return out.raw[:n]

class Dev:
    """Device memory seen through __cuda_array_interface__ (v3)."""
    def __init__(self, ptr, n, typestr="|u1"):
        item = np.dtype(typestr).itemsize
        self.ptr, self.nbytes = ptr, n * item
        self.__cuda_array_interface__ = {
            "data": (ptr, False), "shape": (n,), "typestr": typestr,
            "strides": None, "version": 3, "stream": None}

def fbytes(path, off, n):
    with open(path, "rb") as f:
        f.seek(off)
        return f.read(n)
'''


@pytest.fixture
def run_gpu(run_py):
    """Run ``code`` after PRELUDE in a child pointed at the double; skip on exit 77."""

    def run(code: str, *, env: dict | None = None, need_cuda_build: bool = True,
            timeout: float = 180) -> str:
        e = {
            "MT_GPU_DOUBLE": GD,
            "MEMTIER_CUDA_LIBRARY": os.path.join(GD, "libcuda.so.1"),
            "MEMTIER_CUFILE_LIBRARY": os.path.join(GD, "libcufile.so.0"),
            "MT_NEED_CUDA_BUILD": "1" if need_cuda_build else "0",
        }
        for k in list(os.environ):
            if k.startswith("FAKE_CU"):
                e[k] = None
        # Deferred copies: an async copy lands only when a sync covers it, as
        # on a GPU, so a missing wait shows as wrong bytes ("0" turns it off).
        e["FAKE_CUDA_DEFER_COPIES"] = "1"
        e.update(env or {})
        import textwrap

        r = run_py(PRELUDE + textwrap.dedent(code), timeout=timeout, env=e)
        if r.returncode == EXIT_SKIP:
            pytest.skip(r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "skipped by the child")
        assert r.returncode == 0, f"child failed ({r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-6000:]}"
        return r.stdout

    return run


# ------------------------------------------------------------------ reads


def test_read_into_cuda_array_interface_bytes(run_gpu, pfile):
    path = pfile((8 << 20) + 20000)
    run_gpu(f"""
        P = {path!r}
        with memtier.Context(cache_bytes=0) as ctx:
            for size in (0, 1, 4097, (8 << 20) + 3):
                for off in (0, 1, 4095, 12345):
                    p = dalloc(size)
                    d = Dev(p, size)
                    assert ctx.read_into(P, off, d) == size
                    assert dread(p, size) == fbytes(P, off, size), (size, off)
                    # the module function and read_into_tensor take it too
                    memtier.read_into(P, off + 1, d)
                    assert dread(p, size) == fbytes(P, off + 1, size), (size, off + 1)
                    assert memtier.read_into_tensor(P, off, d, ctx=ctx) is d
                    assert dread(p, size) == fbytes(P, off, size)
                    dfree(p)
            st = ctx.stats()
            assert st.h2d_bytes > 0 or st.gds_bytes > 0, st
            # NULL with zero bytes is a valid empty destination
            assert ctx.read_into(P, 0, Dev(0, 0)) == 0
            # a wider dtype: nbytes = shape * itemsize
            p = dalloc(4000)
            ctx.read_into(P, 7, Dev(p, 1000, "<f4"))
            assert dread(p, 4000) == fbytes(P, 7, 4000)
            # asynchronous
            with ctx.read_async(P, 99, Dev(p, 4000)) as r:
                assert r.wait() == 4000
            assert dread(p, 4000) == fbytes(P, 99, 4000)
            dfree(p)
            # past end of file
            p = dalloc(100)
            try:
                ctx.read_into(P, os.path.getsize(P) - 10, Dev(p, 100))
            except memtier.EndOfFileError:
                pass
            else:
                raise AssertionError("no EndOfFileError")
            # host memory passed as a device array: the library validates the pointer
            host = np.zeros(64, dtype=np.uint8)
            try:
                ctx.read_into(P, 0, Dev(host.__array_interface__["data"][0], 64))
            except memtier.InvalidArgumentError as e:
                print("host pointer:", e)
            else:
                raise AssertionError("a host pointer was accepted as device memory")
            # a read-only or strided device array is refused before any I/O
            d = Dev(p, 100)
            d.__cuda_array_interface__["data"] = (p, True)
            try:
                ctx.read_into(P, 0, d)
            except ValueError as e:
                assert "read-only" in str(e)
            else:
                raise AssertionError("read-only device array accepted")
            dfree(p)
        print("ok")
    """)


def test_gds_path_through_the_double(run_gpu, pfile):
    # gds_mode required: cuFile reads (the double's) straight into device memory
    path = pfile(3 << 20)
    run_gpu(f"""
        P = {path!r}
        with memtier.Context(cache_bytes=0, gds_mode=2, gds_threshold_bytes=4096) as ctx:
            n = (2 << 20) + 5
            p = dalloc(n)
            ctx.read_into(P, 4096, Dev(p, n))
            assert dread(p, n) == fbytes(P, 4096, n)
            st = ctx.stats()
            info = ctx.gpu_info()
            print(st.gds_bytes, st.staged_bytes, st.gds_fallbacks)
            print(info)
            assert st.gds_bytes + st.staged_bytes >= n, st
            dfree(p)
    """)


def test_load_chunks_into_device_buffers(run_gpu, pfile):
    path = pfile(1 << 20)
    run_gpu(f"""
        P = {path!r}
        chunks = [(0, 10), (10, 4096), (100000, 0), (5000, 70001), (3, 1), (1048000, 576)]
        with memtier.Context() as ctx:
            ptrs = [dalloc(s) for _, s in chunks]
            outs = [Dev(p, s) for p, (_, s) in zip(ptrs, chunks)]
            res = memtier.load_chunks(P, chunks, outs, ctx=ctx)
            assert all(a is b for a, b in zip(res, outs))
            for p, (o, s) in zip(ptrs, chunks):
                assert dread(p, s) == fbytes(P, o, s), (o, s)
            # streamed
            seen = set()
            with memtier.iter_chunks(P, chunks[::-1], outs[::-1], ctx=ctx) as stream:
                for k, d in stream:
                    seen.add(k)
            assert seen == set(range(len(chunks)))
            for p, (o, s) in zip(ptrs, chunks):
                assert dread(p, s) == fbytes(P, o, s), (o, s)
            # a chunk past end of file names its index
            try:
                memtier.load_chunks(P, [(0, 10), ((1 << 20) - 5, 10)], outs[:1] + outs[1:2], ctx=ctx)
            except memtier.EndOfFileError as e:
                assert e.index == 1, e
            else:
                raise AssertionError("no EndOfFileError")
            # host and device buffers in one call are refused before any I/O
            try:
                memtier.load_chunks(P, [(0, 10), (0, 10)], [outs[0], bytearray(10)], ctx=ctx)
            except ValueError as e:
                assert "device" in str(e) and "host" in str(e), e
            else:
                raise AssertionError("mixed targets accepted")
            for p in ptrs:
                dfree(p)
        print("ok")
    """)


# ------------------------------------------------------------ safetensors


def _write_safetensors(path, tensors, misalign=False):
    """A safetensors file of numpy arrays (name -> array), file order as given."""
    names = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int64"): "I64",
             np.dtype("uint8"): "U8", np.dtype("int16"): "I16"}
    header, blobs, pos = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [pos, pos + len(b)]}
        blobs.append(b)
        pos += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * ((-len(h)) % 8 + (3 if misalign else 0))
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    return path


def _tensors():
    rng = np.random.default_rng(5)
    return {
        "a.weight": rng.standard_normal((64, 33)).astype(np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
        "b.bias": rng.standard_normal(17).astype(np.float16),
        "ids": rng.integers(-9, 9, size=(5, 7)).astype(np.int64),
        "bytes": rng.integers(0, 255, size=3001).astype(np.uint8),
        "big": rng.standard_normal(300_000).astype(np.float32),
        "tail": rng.integers(-5, 5, size=9).astype(np.int16),
    }


@pytest.mark.parametrize("misalign", [False, True])
def test_safetensors_load_all_into_device_pointer(run_gpu, tmp_path, misalign):
    path = _write_safetensors(str(tmp_path / "m.safetensors"), _tensors(), misalign)
    run_gpu(f"""
        P = {path!r}
        from memtier.safetensors import safe_open
        with safe_open(P, framework="np") as f:
            infos = {{n: f.info(n) for n in f.keys()}}
        live = [i for i in infos.values() if i.nbytes]
        lo = min(i.offset for i in live)
        span = max(i.offset + i.nbytes for i in live) - lo
        p = dalloc(span)
        with memtier.Context() as ctx:
            layout = mst._load_all_to_pointer(P, p, span, ctx=ctx)
            assert set(layout) == set(infos)
            data = dread(p, span)
            for name, (info, rel) in layout.items():
                assert info == infos[name]
                assert rel == (info.offset - lo if info.nbytes else 0)
                assert data[rel:rel + info.nbytes] == fbytes(P, info.offset, info.nbytes), name
            try:
                mst._load_all_to_pointer(P, p, span - 1, ctx=ctx)
            except ValueError as e:
                assert "span" in str(e)
            else:
                raise AssertionError("short buffer accepted")
        dfree(p)
        print("ok")
    """)


def test_prefetch_to_hbm_then_cuda_read_hits_hbm(run_gpu, pfile):
    path = pfile(6 << 20)
    run_gpu(f"""
        P = {path!r}
        with memtier.Context(hbm_cache_bytes=16 << 20, cache_bytes=0) as ctx:
            ctx.prefetch(P, 0, 4 << 20, to_hbm=True)
            st = ctx.stats()
            assert st.hbm_inserted_bytes >= 4 << 20, st
            ctx.reset_stats()
            n = (1 << 20) + 77
            p = dalloc(n)
            ctx.read_into(P, 12345, Dev(p, n))
            assert dread(p, n) == fbytes(P, 12345, n)
            st = ctx.stats()
            assert st.hbm_hit_bytes >= n, st
            assert "resident" in ctx.gpu_info()
            # asynchronous prefetch too
            with ctx.prefetch(P, 4 << 20, 2 << 20, wait=False, to_hbm=True) as r:
                r.wait()
            dfree(p)
        # the tier off (hbm_cache_bytes=0 in the struct means the default; the
        # environment turns it off): TO_HBM is UNSUPPORTED, with gpu_info in the message
        os.environ["MEMTIER_HBM_CACHE_BYTES"] = "0"
        with memtier.Context() as ctx:
            try:
                ctx.prefetch(P, 0, 4096, to_hbm=True)
            except memtier.UnsupportedError as e:
                assert "memtier_gpu_info:" in str(e), e
                assert e.gpu_info.startswith("cuda:")
            else:
                raise AssertionError("TO_HBM with the tier off succeeded")
        print("ok")
    """)


def test_gpu_info_text(run_gpu):
    out = run_gpu("""
        with memtier.Context() as ctx:
            a = ctx.gpu_info()
        b = memtier.gpu_info()
        for text in (a, b):
            keys = [ln.split(":", 1)[0] for ln in text.splitlines()]
            assert keys[:6] == ["cuda", "gds", "gds_mode", "hbm", "last_gds_fallback", "build_tags"], keys
            assert text.startswith("cuda: CUDA available"), text
            assert "libcuda.so.1" in text
            assert "build_tags: [cuda gds]" in text, text
        print(b)
    """)
    assert "gds:" in out


def test_dataset_read_into_device_pointer(run_gpu, pfile, tmp_path):
    path = pfile(1 << 20)
    ranges = np.array([[0, 100], [5000, 0], [4093, 4099], [900000, 70000], [1, 1]], dtype=np.int64)
    idx_file = str(tmp_path / "idx.npy")
    np.save(idx_file, ranges)
    run_gpu(f"""
        from memtier.dataset import MemTierDataset
        P = {path!r}
        ds = MemTierDataset({idx_file!r}, P, context_options={{"cache_bytes": 0}})
        ranges = ds.ranges
        order = [3, 0, 1, -1, 2, 3]
        total = sum(int(ranges[i][1]) for i in order)
        p = dalloc(total)
        lengths = ds._read_into_pointer(order, p)
        assert lengths.tolist() == [int(ranges[i][1]) for i in order]
        got = dread(p, total)
        pos = 0
        for i in order:
            off, n = (int(x) for x in ranges[i])
            assert got[pos:pos + n] == fbytes(P, off, n), i
            pos += n
        dfree(p)
        ds.close()
        print("ok")
    """)


# ----------------------------------------------------------------- errors


def _has_real_torch_cuda() -> bool:
    from memtier import _dtypes

    torch = _dtypes.torch_module()
    return torch is not None and torch.cuda.is_available()


@pytest.mark.parametrize("no_torch", [False, True], ids=["torch", "no_torch"])
def test_cuda_without_torch_cuda_is_unsupported_naming_torch_cuda(run_gpu, tmp_path, no_torch):
    if not no_torch and _has_real_torch_cuda():
        pytest.skip("torch.cuda is available here (the GPU tests cover this machine)")
    if not no_torch:
        from memtier import _dtypes

        if _dtypes.torch_module() is None:
            pytest.skip("torch is not importable in this run (the no_torch case covers it)")
    path = _write_safetensors(str(tmp_path / "m.safetensors"), _tensors())
    idx_file = str(tmp_path / "idx.txt")
    with open(idx_file, "w") as f:
        f.write("0 16\n")
    env = {"MEMTIER_PY_FORCE_NO_TORCH": "1" if no_torch else None}
    run_gpu(f"""
        from memtier import safetensors as mst
        from memtier.dataset import MemTierDataset
        P = {path!r}
        NO_TORCH = {no_torch!r}

        def expect(fn, *more):
            try:
                fn()
            except memtier.UnsupportedError as e:
                msg = str(e)
                assert "torch.cuda" in msg, msg
                for m in more:
                    assert m in msg, (m, msg)
                return msg
            raise AssertionError("no UnsupportedError")

        for dev in ("cuda", "cuda:0"):
            m = expect(lambda: memtier.load_tensor(P, 0, (4,), "float32", device=dev),
                       "memtier_gpu_info:", "cuda: CUDA available", "build_tags:")
            expect(lambda: mst.load_file(P, device=dev), "memtier_gpu_info:")
            expect(lambda: mst.safe_open(P, device=dev))
        expect(lambda: mst.load_file(P, device=0))
        if NO_TORCH:
            expect(lambda: MemTierDataset({idx_file!r}, P, target="cuda"))
        else:
            ds = MemTierDataset({idx_file!r}, P, target="cuda:0")
            assert ds.target == "cuda:0"
            expect(lambda: ds[0], "memtier_gpu_info:")
            expect(lambda: ds.__getitems__([0, 0]))
        # numpy results cannot hold GPU memory
        try:
            mst.load_file(P, device="cuda", framework="np")
        except ValueError as e:
            assert "framework" in str(e)
        else:
            raise AssertionError("framework='np' accepted with a CUDA device")
        # CPU work is unaffected
        assert len(mst.load_file(P)) == 7
        print(m)
    """, env=env)


def test_library_without_a_driver_is_unsupported_with_reason(run_gpu, pfile):
    # Every build has the CUDA backend (it dlopens libcuda at run time): on a
    # machine without a usable driver, every CUDA request is UNSUPPORTED with
    # the dlopen error, and CPU work is unaffected.
    path = pfile(1 << 16)
    run_gpu(f"""
        P = {path!r}
        assert "build_tags: [cuda gds]" in INFO, INFO
        with memtier.Context() as ctx:
            p = dalloc(100)
            for fn in (lambda: ctx.read_into(P, 0, Dev(p, 100)),
                       lambda: memtier.read_into_tensor(P, 0, Dev(p, 100), ctx=ctx),
                       lambda: ctx.read_async(P, 0, Dev(p, 100)).wait(),
                       lambda: memtier.load_chunks(P, [(0, 100)], [Dev(p, 100)], ctx=ctx),
                       lambda: ctx.prefetch(P, 0, 4096, to_hbm=True)):
                try:
                    fn()
                except memtier.UnsupportedError as e:
                    msg = str(e)
                    assert "GPU target unavailable" in msg, msg
                    assert "/nonexistent/libcuda.so.1" in msg, msg
                else:
                    raise AssertionError("CUDA request served without a driver")
            try:
                memtier.load_tensor(P, 0, (4,), "uint8", device="cuda", ctx=ctx)
            except memtier.UnsupportedError as e:
                assert "GPU target unavailable" in str(e), e
            else:
                raise AssertionError("load_tensor(device='cuda') without a driver")
            assert ctx.read(P, 0, 3) == fbytes(P, 0, 3)  # CPU reads are fine
            dfree(p)
        print("ok")
    """, env={"MEMTIER_CUDA_LIBRARY": "/nonexistent/libcuda.so.1"}, need_cuda_build=False)


def test_cpu_work_never_loads_libcuda(run_py, pfile):
    # no gpu_info, no CUDA request: the fake driver is never initialised
    path = pfile(1 << 16)
    r = run_py(f"""
        import ctypes, os
        import memtier
        from memtier import safetensors
        with memtier.Context() as ctx:
            assert ctx.read({path!r}, 0, 4) == bytes([7, 138, 13, 144])
            memtier.load_tensor({path!r}, 0, (8,), "uint8")
        cu = ctypes.CDLL(os.path.join({GD!r}, "libcuda.so.1"))
        cu.fake_cuda_stat.restype = ctypes.c_longlong
        print(cu.fake_cuda_stat(b"calls_cuInit"))
    """, env={"MEMTIER_CUDA_LIBRARY": os.path.join(GD, "libcuda.so.1")})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "0", r.stdout
