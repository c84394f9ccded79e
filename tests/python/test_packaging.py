"""Packaging and binding checks: the generated cdef against the library (P1), the
struct layouts against the C compiler, the version, the wheel (W1/W2), the
missing-Go error, library loading in busy processes and its failures (B21)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

import memtier
from memtier import _ffi

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---------------------------------------------------------------- parsing


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _norm(decl: str) -> str:
    s = re.sub(r"\s+", " ", decl).strip()
    s = re.sub(r"\s*\*\s*", "* ", s)
    s = re.sub(r"\s*([(),\[\]])\s*", r"\1", s)
    return s.replace("* )", "*)").strip()


def _prototypes(text: str, api_prefix: bool) -> dict:
    body = re.sub(r"^\s*#[^\n]*$", " ", text.replace("\\\n", " "), flags=re.M)
    body = re.sub(r"typedef\s+(struct|enum)\s+\w+\s*\{.*?\}\s*\w+\s*;", " ", body, flags=re.S)
    body = re.sub(r"typedef[^;]*;", " ", body)
    body = re.sub(r'extern\s+"C"\s*\{|^\s*\}\s*$', " ", body, flags=re.M)
    out = {}
    for stmt in body.split(";"):
        stmt = stmt.strip()
        if not stmt:
            continue
        if api_prefix:
            if "MEMTIER_API" not in stmt:
                continue
            stmt = stmt[stmt.index("MEMTIER_API") + len("MEMTIER_API"):]
        m = re.search(r"(\w+)\s*\(", stmt)
        assert m, f"cannot parse declaration: {stmt!r}"
        out[m.group(1)] = _norm(stmt)
    return out


# ---------------------------------------------------------------- P1: cdef and library

# The cdef (_cdef.py), the constants and the version (_constants.py) are
# generated from include/memtier.h by tools/mtgen, and `go test ./...` fails
# when they are stale (tools/mtgen TestGeneratedFilesUpToDate): no test
# compares them with the header here. What is left is behaviour: the symbols
# exist in the library, cffi lays out the structs as the C compiler does,
# and the library's major version is the package's.


def test_every_cdef_symbol_resolves_in_the_library():
    rt = _ffi.runtime()
    for name in _prototypes(_strip_comments(_ffi.CDEF), api_prefix=False):
        assert getattr(rt.lib, name) is not None, name


def test_struct_layouts_match_the_c_compiler(tmp_path):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    ffi = _ffi.get_ffi()
    lines = []
    for struct in ("memtier_config_t", "memtier_stats_t", "memtier_iovec_t",
                   "memtier_decision_t", "memtier_prefetch_opts_t"):
        lines.append(f'printf("{struct} sizeof %zu\\n", sizeof({struct}));')
        for fname, _ in ffi.typeof(struct).fields:
            lines.append(f'printf("{struct} {fname} %zu\\n", offsetof({struct}, {fname}));')
    src = tmp_path / "layout.c"
    src.write_text("#include <stdio.h>\n#include <stddef.h>\n#include \"memtier.h\"\n"
                   "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c99", "-I", os.path.join(REPO, "include"), str(src), "-o",
                    str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        struct, what, value = line.split()
        got = ffi.sizeof(struct) if what == "sizeof" else ffi.offsetof(struct, what)
        assert got == int(value), line


def test_library_major_version_is_the_packages():
    assert memtier.__version__ == _ffi.PACKAGE_VERSION
    rt = _ffi.runtime()
    assert rt.version_number // 10000 == _ffi.PACKAGE_VERSION_NUMBER // 10000


# ---------------------------------------------------------------- the cdef parsed at build time


def _abi_builder():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "memtier_abi_build", os.path.join(REPO, "python", "fast", "abi_module.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_abi_module_binds_as_the_runtime_parse(tmp_path):
    """memtier._abi (python/fast/abi_module.py) opens the library with the same
    symbols, constants and struct layouts as an FFI parsed at run time, and a
    symbol the library lacks is the same AttributeError."""
    pytest.importorskip("cffi")
    import importlib.util

    import cffi

    path = _abi_builder().write(str(tmp_path))
    spec = importlib.util.spec_from_file_location("memtier_abi_probe", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.CDEF == _ffi.CDEF
    parsed = cffi.FFI()
    parsed.cdef(_ffi.CDEF)
    rt = _ffi.runtime()
    lib = _ffi._Lib(mod.ffi, mod.ffi.dlopen(rt.path))
    ref = parsed.dlopen(rt.path)
    assert sorted(dir(lib)) == sorted(dir(ref))
    for name in dir(ref):
        want = getattr(ref, name)
        got = getattr(lib, name)
        if isinstance(want, int):
            assert got == want, name
        else:
            tw, tg = parsed.typeof(want), mod.ffi.typeof(got)  # cnames spell typedefs differently
            assert ([a.kind for a in tg.args], tg.result.kind, tg.ellipsis) == \
                ([a.kind for a in tw.args], tw.result.kind, tw.ellipsis), name
            assert int(parsed.cast("uintptr_t", want)) == int(mod.ffi.cast("uintptr_t", got)), name
    for struct in ("memtier_config_t", "memtier_stats_t", "memtier_iovec_t",
                   "memtier_decision_t", "memtier_prefetch_opts_t"):
        assert mod.ffi.sizeof(struct) == parsed.sizeof(struct), struct
        assert [(f, mod.ffi.offsetof(struct, f)) for f, _ in mod.ffi.typeof(struct).fields] == \
            [(f, parsed.offsetof(struct, f)) for f, _ in parsed.typeof(struct).fields], struct
    assert mod.ffi.string(lib.memtier_version()).decode("ascii") == rt.version
    libc_abi = _ffi._Lib(mod.ffi, mod.ffi.dlopen("libc.so.6"))
    libc_ref = parsed.dlopen("libc.so.6")
    with pytest.raises(AttributeError) as want_err:
        libc_ref.memtier_version
    with pytest.raises(AttributeError) as got_err:
        libc_abi.memtier_version
    assert str(got_err.value) == str(want_err.value)
    assert getattr(libc_abi, "memtier_version", None) is None


class _FakeAbi:
    def __init__(self, cdef):
        self.CDEF = cdef
        self.ffi = object()  # stands for the prebuilt FFI


@pytest.mark.parametrize("case", ["current", "stale", "unimportable"])
def test_get_ffi_uses_the_abi_module_only_for_the_current_cdef(case, monkeypatch):
    pytest.importorskip("cffi")
    import cffi

    real = _ffi.runtime().ffi  # loaded before the patch: the process keeps its library
    fake = None if case == "unimportable" else \
        _FakeAbi(_ffi.CDEF if case == "current" else _ffi.CDEF + "\n/* an older header */\n")
    monkeypatch.setitem(sys.modules, "memtier._abi", fake)  # None: its import raises ImportError
    if fake is None:
        monkeypatch.delattr(memtier, "_abi", raising=False)
    else:
        monkeypatch.setattr(memtier, "_abi", fake, raising=False)
    monkeypatch.setattr(_ffi, "_ffi_obj", None)
    f = _ffi.get_ffi()
    assert _ffi.get_ffi() is f  # made once
    if case == "current":
        assert f is fake.ffi
        return
    assert isinstance(f, cffi.FFI)  # parsed here, as without the module
    for struct in ("memtier_stats_t", "memtier_iovec_t"):
        assert f.sizeof(struct) == real.sizeof(struct), struct


# ---------------------------------------------------------------- W1/W2: the wheel


def _copy_tree(dst):
    def ignore(directory, names):
        skip = {".git", "build", "dist", "__pycache__", "_lib", ".pytest_cache"}
        return [n for n in names if n in skip or n.startswith("build-") or n.endswith(".egg-info")]

    shutil.copytree(REPO, dst, ignore=ignore, symlinks=True)
    return dst


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory):
    return _copy_tree(str(tmp_path_factory.mktemp("src") / "memtier"))


@pytest.fixture(scope="module")
def wheel(source_copy, tmp_path_factory):
    pytest.importorskip("build", reason="the `build` package is not installed")
    pytest.importorskip("wheel", reason="the `wheel` package is not installed")
    if shutil.which("go") is None and not os.path.exists("/usr/local/go/bin/go"):
        pytest.skip("Go is not installed")
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation",
                        "--outdir", str(out), source_copy],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    wheels = [f for f in os.listdir(out) if f.endswith(".whl")]
    assert len(wheels) == 1, wheels
    return os.path.join(out, wheels[0])


@pytest.mark.slow
def test_w1_wheel_contents_and_tags(wheel):
    name = os.path.basename(wheel)
    # manylinux_<glibc floor of the library>_<arch> (setup.py reads it with readelf)
    # cp311-abi3: the wheel carries the compiled fast path memtier._fast, built
    # against the 3.11 stable ABI (cp310-cp310 when built by Python 3.10); a
    # build that silently fell back to ABI mode only would be py3-none.
    m = re.fullmatch(rf"memtier-{re.escape(memtier.__version__)}-(cp311-abi3|cp310-cp310)-"
                     r"(manylinux_2_\d+_x86_64)\.whl", name)
    assert m, name
    py_tag, tag = m.group(1), m.group(2)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        assert "memtier/_lib/libmemtier.so" in names
        fast = "memtier/_fast.abi3.so" if py_tag == "cp311-abi3" else \
            "memtier/_fast.cpython-310-x86_64-linux-gnu.so"
        assert fast in names, sorted(n for n in names if n.endswith(".so"))
        assert "memtier/py.typed" in names
        assert "memtier/_abi.py" in names  # the cdef parsed at build time (setup.py build_abi)
        for mod in ("__init__", "_ffi", "_errors", "_context", "_tensor", "_dtypes"):
            assert f"memtier/{mod}.py" in names
        assert not any(n.endswith(".h") for n in names), "the cgo header must not ship"
        info = f"memtier-{memtier.__version__}.dist-info"
        wheel_meta = z.read(f"{info}/WHEEL").decode()
        meta = z.read(f"{info}/METADATA").decode()
        so = z.read("memtier/_lib/libmemtier.so")
    assert "Root-Is-Purelib: false" in wheel_meta
    assert f"Tag: {py_tag}-{tag}" in wheel_meta
    assert "Requires-Python: >=3.10" in meta
    assert re.search(r"^Requires-Dist: cffi", meta, re.M)
    assert re.search(r"^Requires-Dist: numpy", meta, re.M)
    assert re.search(r"^Requires-Dist: torch.*extra == \"torch\"", meta, re.M)
    assert so[:4] == b"\x7fELF"
    readelf = shutil.which("readelf")
    if readelf:
        lib = os.path.join(os.path.dirname(wheel), "libmemtier.so")
        with open(lib, "wb") as f:
            f.write(so)
        dyn = subprocess.run([readelf, "-d", lib], capture_output=True, text=True).stdout
        assert "Library soname: [libmemtier.so]" in dyn
        print("ELF FLAGS:", [ln.strip() for ln in dyn.splitlines() if "FLAGS" in ln])
        # built with the CUDA and GDS backends by default, which add no link-time
        # dependency: libcuda/libcufile are dlopen'ed at run time
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
        assert needed == ["libc.so.6"], needed
        objdump = shutil.which("objdump")
        if objdump:
            r = subprocess.run(["sh", os.path.join(REPO, "tests", "abi", "check_elf.sh"),
                                readelf, objdump, lib], capture_output=True, text=True)
            assert r.returncode == 0, r.stdout + r.stderr
    if os.environ.get("MEMTIER_PREBUILT_LIBRARY"):
        return  # not a library this build made
    # every build has both GPU backends compiled in (dlopen at run time)
    site = os.path.join(os.path.dirname(wheel), "probe")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    env = dict(os.environ, PYTHONPATH=site, MEMTIER_CUDA_LIBRARY="/nonexistent/libcuda.so.1")
    env.pop("MEMTIER_LIBRARY", None)
    env.pop("MEMTIER_PYTHON_FAST", None)
    r = subprocess.run([sys.executable, "-c", "import memtier; print(memtier.gpu_info()); "
                        "print('fast:', memtier.runtime_info()['python_fast_path']); "
                        "import memtier._abi, memtier._ffi as f; "
                        "print('abi:', f.get_ffi() is memtier._abi.ffi, type(f.runtime().lib).__name__)"],
                       capture_output=True, text=True, env=env, cwd=site, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "build_tags: [cuda gds]" in r.stdout, r.stdout
    assert "cuda: GPU target unavailable" in r.stdout, r.stdout
    assert "fast: compiled\n" in r.stdout, r.stdout  # the wheel's memtier._fast loads and binds
    assert "abi: True _Lib\n" in r.stdout, r.stdout  # and its memtier._abi is the cdef in use


@pytest.mark.slow
def test_w2_installed_wheel_works_from_another_directory(wheel, tmp_path):
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                        "--target", str(site), wheel], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    data = tmp_path / "data.bin"
    data.write_bytes(bytes(range(256)))
    env = dict(os.environ, PYTHONPATH=str(site))
    env.pop("MEMTIER_LIBRARY", None)
    code = ("import memtier; assert memtier.read(%r, 10, 5) == bytes(range(10, 15)); "
            "print(memtier.runtime_info()['library'])" % str(data))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=str(tmp_path), env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(site / "memtier" / "_lib" / "libmemtier.so")


def test_missing_go_is_a_clear_error(source_copy, tmp_path):
    env = dict(os.environ, MEMTIER_GO=str(tmp_path / "no-such-go"))
    env.pop("MEMTIER_PREBUILT_LIBRARY", None)
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_go"], cwd=source_copy,
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "Go >= 1.26" in out, out[-2000:]
    assert "go.dev" in out


# ---------------------------------------------------------------- B21: loading


def test_b21_library_flags_informational():
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf not installed")
    path = _ffi.runtime().path
    dyn = subprocess.run([readelf, "-d", path], capture_output=True, text=True).stdout
    flags = [ln.split(None, 2)[-1] for ln in dyn.splitlines() if "FLAGS" in ln]
    print("libmemtier.so", path, "FLAGS:", flags)


IMPORT_ORDERS = {
    "torch-first": """
        import torch, memtier
        assert memtier.read(P, 0, 4) == bytes(range(4))
        assert float(torch.ones(3).sum()) == 3.0
    """,
    "memtier-first": """
        import memtier
        with memtier.Context() as ctx:
            assert ctx.read(P, 0, 4) == bytes(range(4))
        import torch
        assert float(torch.ones(3).sum()) == 3.0
        t = memtier.load_tensor(P, 0, (4,), torch.uint8)
        assert t.tolist() == [0, 1, 2, 3]
    """,
    "everything-first": """
        import importlib
        for name in ("numpy", "scipy", "torch", "sklearn"):
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        import memtier
        assert memtier.read(P, 0, 4) == bytes(range(4))
    """,
    "spawn-worker-after-torch": """
        import torch
        from torch.utils.data import DataLoader, Dataset

        class DS(Dataset):
            def __len__(self):
                return 8
            def __getitem__(self, i):
                import memtier  # loads in the worker, after torch's handlers
                return torch.tensor(list(memtier.read(P, i, 2)))

        if __name__ == "__main__":
            import memtier
            memtier.read(P, 0, 1)  # the parent uses it too
            dl = DataLoader(DS(), batch_size=4, num_workers=1,
                            multiprocessing_context="spawn", timeout=120)
            out = torch.cat([b.flatten() for b in dl]).tolist()
            assert out == [x for i in range(8) for x in (i, i + 1)], out
    """,
}


@pytest.mark.parametrize("order", sorted(IMPORT_ORDERS))
def test_b21_import_orders(order, run_py, tmp_path):
    import importlib.util

    # about importing torch itself: runs whenever torch is installed, also
    # under MEMTIER_PY_FORCE_NO_TORCH (memtier then just does not use it)
    if order != "everything-first" and importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    data = tmp_path / "data.bin"
    data.write_bytes(bytes(range(256)))
    import textwrap

    code = f"P = {str(data)!r}\n" + textwrap.dedent(IMPORT_ORDERS[order]) + "\nprint('OK')\n"
    r = run_py(code, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "OK" in r.stdout


LOAD_FAILURE = """
import memtier
try:
    memtier.read(__file__, 0, 1)
except ImportError as e:
    assert isinstance(e, RuntimeError) and isinstance(e, memtier.LibraryLoadError)
    print(str(e))
    print("RAISED")
"""


@pytest.mark.parametrize("kind", ["missing", "corrupt", "not-memtier"])
def test_b21_bad_library_is_an_import_error_with_dlerror_and_hint(kind, run_py, tmp_path):
    if kind == "missing":
        lib = str(tmp_path / "nowhere" / "libmemtier.so")
        needle = "cannot open shared object file"
    elif kind == "corrupt":
        lib = str(tmp_path / "libmemtier.so")
        with open(lib, "wb") as f:
            f.write(b"\x7fELF" + b"garbage" * 100)
        needle = str(lib)
    else:
        lib = "libc.so.6"  # loads, but has no memtier_* symbols
        needle = "not a libmemtier.so"
    r = run_py(LOAD_FAILURE, env={"MEMTIER_LIBRARY": lib}, timeout=60)
    assert r.returncode == 0, r.stderr  # an exception, not a crash
    assert "RAISED" in r.stdout
    assert needle in r.stdout
    assert "hint:" in r.stdout and "MEMTIER_LIBRARY" in r.stdout
    if kind == "corrupt":
        assert re.search(r"invalid ELF header|file too short|ELF", r.stdout)


def test_major_version_mismatch_is_refused(run_py):
    r = run_py("""
        import memtier
        from memtier import _ffi
        _ffi.PACKAGE_VERSION_NUMBER = 10000   # pretend the package is 1.0.0
        try:
            memtier.read(__file__, 0, 1)
        except memtier.LibraryLoadError as e:
            print("REFUSED", e)
    """)
    assert r.returncode == 0, r.stderr
    assert "REFUSED" in r.stdout and "major" in r.stdout


def test_explicit_library_path_is_used(run_py, tmp_path):
    src = _ffi.runtime().path
    copy = tmp_path / "libmemtier.so"
    shutil.copyfile(src, copy)
    r = run_py("""
        import memtier
        print(memtier.runtime_info()["library"])
    """, env={"MEMTIER_LIBRARY": str(copy)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(copy)
