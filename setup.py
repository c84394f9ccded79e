"""Build script of the ``memtier`` Python package.

``pip install .``, ``pip install -e .`` and ``python -m build`` build
libmemtier.so with the project's CMake, through the same target (``memtier_go``
in cmake/GoSharedLibrary.cmake) whose output ctest tests, and copy it into
``memtier/_lib/``::

    cmake -S <repo> -B <build dir> -DMEMTIER_BUILD_TESTS=OFF ...
    cmake --build <build dir> --target memtier_go

The Go invocation and its flags live only in CMake. The build directory is
``build-py/cmake-editable`` for an editable install (which writes the library
into the source tree, python/memtier/_lib/, git-ignored, where the package
finds it) and under setuptools' build_temp otherwise. The library always has
the CUDA and GDS backends: libcuda.so.1 and libcufile.so.0 are dlopen'ed at
run time, so it needs only libc, and on a machine without a GPU a CUDA read
raises UnsupportedError saying why (``memtier.gpu_info()``).

The package binds the library through cffi. Its hottest calls (``read_into``,
``read``, ``readv``) also have a compiled path, ``memtier._fast``: a small cffi
API-mode extension built from python/fast/ (it does not link libmemtier.so; it
is handed the entry points of the library the ABI-mode loader opened). It is
optional: when it cannot be built (no C compiler, no Python headers, no cffi
at build time) the build says why and goes on, and the package runs in ABI
mode only. With it, the wheel is tagged ``cp311-abi3-manylinux_<glibc
floor>_<arch>`` (the 3.11 stable ABI; ``cp310-cp310-...`` when built by Python
3.10), without it ``py3-none-manylinux_<glibc floor>_<arch>``; the floor is the
newest GLIBC_x.y symbol version the library and the extension need (readelf),
which is the tag ``auditwheel show`` derives. ``--plat-name`` on bdist_wheel
overrides it; without readelf the tag is ``linux_<arch>``.

Environment knobs of the build:

``MEMTIER_GO``
    the ``go`` command to use (default: ``go`` on PATH, then /usr/local/go/bin/go).
``MEMTIER_PREBUILT_LIBRARY``
    path of an already built libmemtier.so (e.g. a CMake build's) to package
    instead of building one.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys

from setuptools import Command, Distribution, Extension, find_packages, setup
from setuptools.command.build import build as _build
from setuptools.command.build_ext import build_ext as _build_ext

try:  # setuptools >= 70.1 ships bdist_wheel itself
    from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
except ImportError:  # pragma: no cover - older setuptools
    from wheel.bdist_wheel import bdist_wheel as _bdist_wheel

ROOT = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(ROOT, "include", "memtier.h")
GO_MIN = (1, 26)  # go.mod: go 1.26.0
CMAKE_MIN = (3, 20)  # CMakeLists.txt: cmake_minimum_required
CMAKE_TARGET = "memtier_go"  # cmake/GoSharedLibrary.cmake
LIB_NAME = "libmemtier.so"
LIB_SUBDIR = os.path.join("memtier", "_lib")
#: The library only; the C tests, examples and Python suite are ctest's business.
CMAKE_DEFINES = ["-DCMAKE_BUILD_TYPE=Release", "-DMEMTIER_BUILD_TESTS=OFF",
                 "-DMEMTIER_BUILD_EXAMPLES=OFF", "-DMEMTIER_PYTHON_TESTS=OFF"]
FAST_MODULE = "memtier._fast"  # python/fast/build.py: MODULE
FAST_BUILD = os.path.join(ROOT, "python", "fast", "build.py")
ABI_BUILD = os.path.join(ROOT, "python", "fast", "abi_module.py")  # writes memtier/_abi.py


def read_version() -> str:
    """The package version: MEMTIER_VERSION_STRING of include/memtier.h."""
    with open(HEADER, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r'^#define\s+MEMTIER_VERSION_STRING\s+"([^"]+)"', text, re.M)
    if not m:
        raise RuntimeError(f"MEMTIER_VERSION_STRING not found in {HEADER}")
    return m.group(1)


def _find_go() -> str | None:
    explicit = os.environ.get("MEMTIER_GO")
    if explicit:
        return explicit
    found = shutil.which("go")
    if found:
        return found
    for cand in ("/usr/local/go/bin/go", os.path.expanduser("~/go/bin/go")):
        if os.access(cand, os.X_OK):
            return cand
    return None


def _go_missing(why: str) -> SystemExit:
    need = ".".join(map(str, GO_MIN))
    return SystemExit(
        f"error: building memtier needs Go >= {need} (with cgo and a C compiler such as gcc): "
        f"{why}. libmemtier.so is a Go runtime built with `go build -buildmode=c-shared`. "
        f"Install Go {need} or newer from https://go.dev/dl/ and put `go` on PATH (or set "
        f"MEMTIER_GO=/path/to/go), or set MEMTIER_PREBUILT_LIBRARY=/path/to/libmemtier.so "
        f"to package a library built elsewhere (e.g. by CMake)."
    )


def _check_version(cmd: list[str], pattern: str, minimum: tuple[int, int], missing) -> str:
    """Run ``cmd`` (a --version query) and check it reports at least ``minimum``."""
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise missing(f"`{' '.join(cmd)}` failed ({e})") from None
    m = re.search(pattern, out)
    if not m:
        raise missing(f"cannot parse the output of `{' '.join(cmd)}`: {out.strip()!r}")
    if (int(m.group(1)), int(m.group(2))) < minimum:
        raise missing(f"found {out.strip().splitlines()[0]}, which is too old")
    return out.strip().splitlines()[0]


def _cmake_missing(why: str) -> SystemExit:
    need = ".".join(map(str, CMAKE_MIN))
    return SystemExit(
        f"error: building memtier needs CMake >= {need}: {why}. setup.py builds libmemtier.so "
        f"with the project's CMakeLists.txt. Install CMake (your distribution's package, or "
        f"`pip install cmake`) and put `cmake` on PATH."
    )


def _same_source(build_dir: str) -> bool:
    """Whether build_dir is a CMake tree of this source tree (or not one yet)."""
    cache = os.path.join(build_dir, "CMakeCache.txt")
    if not os.path.exists(cache):
        return True
    with open(cache, encoding="utf-8", errors="replace") as f:
        m = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", f.read(), re.M)
    return bool(m) and os.path.realpath(m.group(1)) == os.path.realpath(ROOT)


class build_go(Command):
    """Build libmemtier.so with CMake (target memtier_go) into memtier/_lib/."""

    description = "build libmemtier.so with the project's CMake (target memtier_go)"
    user_options: list = []

    def initialize_options(self) -> None:
        self.build_lib = None
        self.build_temp = None
        self.editable_mode = False  # set by setuptools' editable_wheel (PEP 660)

    def finalize_options(self) -> None:
        self.set_undefined_options("build", ("build_lib", "build_lib"),
                                   ("build_temp", "build_temp"))

    def _target(self) -> str:
        if self.editable_mode:
            # Editable installs import the package from python/; the library
            # must sit beside its sources (python/memtier/_lib is git-ignored).
            return os.path.join(ROOT, "python", LIB_SUBDIR, LIB_NAME)
        return os.path.join(self.build_lib, LIB_SUBDIR, LIB_NAME)

    def _build_dir(self) -> str:
        if self.editable_mode:
            return os.path.join(ROOT, "build-py", "cmake-editable")
        return os.path.abspath(os.path.join(self.build_temp, "cmake"))

    def _run(self, cmd: list[str], what: str) -> None:
        print(f"memtier: {' '.join(cmd)}", file=sys.stderr)
        try:
            subprocess.run(cmd, cwd=ROOT, check=True)
        except subprocess.CalledProcessError as e:
            raise SystemExit(f"error: {what} failed with exit status {e.returncode}: "
                             f"`{' '.join(cmd)}` (its messages are above)") from None

    def run(self) -> None:
        out = self._target()
        os.makedirs(os.path.dirname(out), exist_ok=True)
        prebuilt = os.environ.get("MEMTIER_PREBUILT_LIBRARY")
        if prebuilt:
            if not os.path.isfile(prebuilt):
                raise SystemExit(f"error: MEMTIER_PREBUILT_LIBRARY={prebuilt!r} is not a file")
            self.announce(f"copying prebuilt {prebuilt} -> {out}", level=2)
            shutil.copyfile(prebuilt, out)
            return
        # Go is checked here, before CMake, for the clearer message.
        go = _find_go()
        if go is None:
            raise _go_missing("the `go` command was not found on PATH")
        go_version = _check_version([go, "version"], r"go(\d+)\.(\d+)", GO_MIN, _go_missing)
        cmake = shutil.which("cmake")
        if cmake is None:
            raise _cmake_missing("the `cmake` command was not found on PATH")
        _check_version([cmake, "--version"], r"version (\d+)\.(\d+)", CMAKE_MIN, _cmake_missing)
        self.announce(f"memtier: {go_version}", level=2)

        build_dir = self._build_dir()
        if not _same_source(build_dir):
            # A tree configured for another copy of the sources (CMake refuses it).
            shutil.rmtree(build_dir)
        self._run([cmake, "-S", ROOT, "-B", build_dir, *CMAKE_DEFINES, f"-DGO_EXECUTABLE={go}"],
                  "configuring libmemtier.so with CMake")
        self._run([cmake, "--build", build_dir, "--target", CMAKE_TARGET],
                  f"building libmemtier.so (cmake --build --target {CMAKE_TARGET})")
        built = os.path.join(build_dir, LIB_NAME)
        if not os.path.isfile(built):
            raise SystemExit(f"error: cmake --build --target {CMAKE_TARGET} did not write {built}")
        # Copy, then rename: a process that has the old library mapped keeps it.
        tmp = out + ".tmp"
        shutil.copyfile(built, tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)

    def get_outputs(self) -> list[str]:
        return [self._target()]

    def get_output_mapping(self) -> dict[str, str]:
        return {}

    def get_source_files(self) -> list[str]:
        return []


def _script_module(path: str, name: str):
    """The build script at path (python/fast/) loaded as module name, without
    importing memtier: the build must not import the package it builds."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class build_abi(Command):
    """Write memtier/_abi.py: the cdef parsed now (cffi out-of-line ABI mode), so a
    process imports it instead of parsing the cdef at run time (python/fast/abi_module.py).
    Without cffi at build time it says why and goes on: the package then parses the cdef
    when it loads the library, as before (same results, about 100 ms more per process)."""

    description = "write memtier/_abi.py, the cdef parsed at build time (cffi out-of-line ABI mode)"
    user_options: list = []

    def initialize_options(self) -> None:
        self.build_lib = None
        self.editable_mode = False  # set by setuptools' editable_wheel (PEP 660)

    def finalize_options(self) -> None:
        self.set_undefined_options("build", ("build_lib", "build_lib"))

    def _target_dir(self) -> str:
        if self.editable_mode:  # imported from python/ (python/memtier/_abi.py is git-ignored)
            return os.path.join(ROOT, "python", "memtier")
        return os.path.join(self.build_lib, "memtier")

    def run(self) -> None:
        mod = _script_module(ABI_BUILD, "memtier_abi_build")
        try:
            mod.write(self._target_dir())
        except Exception as e:  # noqa: BLE001 - optional: the package parses at run time then
            print(f"memtier: warning: memtier/_abi.py was not written ({type(e).__name__}: {e}); "
                  "the package will parse the cdef at run time (about 100 ms per process)",
                  file=sys.stderr)

    def get_outputs(self) -> list[str]:
        return [os.path.join(self._target_dir(), "_abi.py")]

    def get_output_mapping(self) -> dict[str, str]:
        return {}

    def get_source_files(self) -> list[str]:
        return []


def _fast_builder():
    """python/fast/build.py as a module (it imports cffi only when it builds)."""
    return _script_module(FAST_BUILD, "memtier_fast_build")


def _fast_extension() -> Extension:
    fb = _fast_builder()
    # The listed source is the hand-written one (so the sdist carries it);
    # build_ext swaps in the C file cffi generates from it.
    return Extension(FAST_MODULE, sources=[os.path.relpath(fb.SOURCE, ROOT)],
                     **fb.extension_kwargs())


class build_ext(_build_ext):
    """Build memtier._fast, the optional compiled fast path: cffi writes its C
    source (python/fast/build.py), then setuptools compiles it. A failure
    (no compiler, no Python headers, no cffi) is reported and the build goes
    on: the package then runs in cffi ABI mode only, with the same results."""

    def build_extensions(self) -> None:
        for ext in list(self.extensions):
            if ext.name != FAST_MODULE:
                self.build_extension(ext)
            elif not self._build_fast(ext):
                # Not built: drop it, so that the in-place copy of an editable
                # install and the wheel's file list do not look for it.
                self.extensions.remove(ext)

    def _build_fast(self, ext) -> bool:
        dist = self.distribution
        dist.memtier_fast = None
        try:
            fb = _fast_builder()
            ext.sources = [fb.emit_c(os.path.join(os.path.abspath(self.build_temp), "memtier_fast",
                                                  "_fast.c"))]
            self.build_extension(ext)
        except Exception as e:  # noqa: BLE001 - optional: any failure leaves ABI mode
            print(f"memtier: warning: the compiled fast path {FAST_MODULE} was not built "
                  f"({type(e).__name__}: {e}); the package will use cffi ABI mode only "
                  "(same results, more time per call). It needs a C compiler, the Python "
                  "headers (python3-dev) and cffi at build time.", file=sys.stderr)
            return False
        dist.memtier_fast = self.get_ext_fullpath(ext.name)
        return True


class build(_build):
    sub_commands = _build.sub_commands + [("build_go", None), ("build_abi", None)]


class BinaryDistribution(Distribution):
    """Not pure: the package carries a shared library, so build and install
    use the platform lib directory (platlib) and the wheel root is not purelib."""

    def has_ext_modules(self) -> bool:
        return True


def glibc_floor(lib: str) -> tuple[int, int] | None:
    """The newest GLIBC_x.y symbol version ``lib`` needs (readelf -V), or None."""
    readelf = shutil.which("readelf")
    if readelf is None or not os.path.isfile(lib):
        return None
    r = subprocess.run([readelf, "-V", "--wide", lib], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    # Version-needs entries read "Name: GLIBC_2.34  Flags: ..."; GLIBC_PRIVATE has no number.
    found = [(int(a), int(b)) for a, b in re.findall(r"Name: GLIBC_(\d+)\.(\d+)", r.stdout)]
    return max(found) if found else None


class bdist_wheel(_bdist_wheel):
    """A platform wheel that works on any Python 3: py3-none-<platform>, the
    platform being manylinux_<glibc floor>_<arch> (PEP 600)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        impl, abi, plat = super().get_tag()
        fast = getattr(self.distribution, "memtier_fast", None)  # set by build_ext
        if not self.plat_name_supplied and sys.platform.startswith("linux"):
            lib = self.get_finalized_command("build_go")
            floor = None
            if not lib.editable_mode:
                floors = [f for f in (glibc_floor(lib._target()), glibc_floor(fast or "")) if f]
                floor = max(floors) if floors else None
            if floor is not None:
                plat = f"manylinux_{floor[0]}_{floor[1]}_{platform.machine()}"
        if fast is None:
            return "py3", "none", plat
        if _fast_builder().limited_api():
            return _fast_builder().LIMITED_API_TAG, "abi3", plat
        return impl, abi, plat


with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    _long_description = f.read()

setup(
    name="memtier",
    version=read_version(),
    description="MemTier: a GPU-aware data supply runtime (Go, C API, Python bindings)",
    long_description=_long_description,
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    package_dir={"": "python"},
    # every package under python/memtier, so a new (or generated) one ships too
    packages=find_packages(where="python", include=["memtier", "memtier.*"]),
    package_data={"memtier": ["py.typed"]},
    include_package_data=False,
    zip_safe=False,
    install_requires=["cffi>=1.15", "numpy>=1.22"],
    # "progress": the tqdm bar of `python -m memtier.pack` (optional: it runs without tqdm)
    extras_require={"torch": ["torch>=2.1"], "bf16": ["ml_dtypes>=0.3"], "progress": ["tqdm>=4.40"],
                    "test": ["pytest>=7"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Operating System :: POSIX :: Linux",
        "Programming Language :: Go",
    ],
    ext_modules=[_fast_extension()],
    distclass=BinaryDistribution,
    cmdclass={"build": build, "build_go": build_go, "build_abi": build_abi, "build_ext": build_ext,
              "bdist_wheel": bdist_wheel},
    options={"build": {"build_base": "build-py"}},
)
