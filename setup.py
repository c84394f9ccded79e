"""Build script of the ``memtier`` Python package.

``pip install .``, ``pip install -e .`` and ``python -m build --wheel`` all run
one extra build step, ``build_go``, that compiles the Go runtime into
``memtier/_lib/libmemtier.so``::

    go build -buildmode=c-shared -trimpath \
        -ldflags=-extldflags=-Wl,-soname,libmemtier.so \
        -o <build_lib>/memtier/_lib/libmemtier.so ./capi

(run from the repository root with GOFLAGS=-buildvcs=false and CGO_CFLAGS
adding -I<repo>/include). An editable install writes the library into the
source tree instead (python/memtier/_lib/, git-ignored), where the package
finds it.

The package is loaded through cffi in ABI mode, so nothing is compiled against
CPython: the wheel is tagged ``py3-none-<platform>`` (default
``linux_x86_64``; pass ``--plat-name manylinux_2_34_x86_64`` to bdist_wheel for
the glibc floor of a build on Debian 12) with ``Root-Is-Purelib: false``.

Environment knobs of the build:

``MEMTIER_GO``
    the ``go`` command to use (default: ``go`` on PATH, then /usr/local/go/bin/go).
``MEMTIER_GO_TAGS``
    comma-separated Go build tags. Default (unset): ``memtier_cuda,memtier_gds``,
    the CUDA target and GPUDirect Storage backends. They add no link-time
    dependency: libcuda.so.1 and libcufile.so.0 are dlopen'ed at run time (names
    overridable with ``MEMTIER_CUDA_LIBRARY`` / ``MEMTIER_CUFILE_LIBRARY``), so the
    library still needs only libc and, on a machine without a GPU, a CUDA read
    raises UnsupportedError saying why (``memtier.gpu_info()``). Set it empty
    (``MEMTIER_GO_TAGS=``) for a CPU-only build.
``MEMTIER_PREBUILT_LIBRARY``
    path of an already built libmemtier.so (e.g. the CMake one) to package
    instead of running ``go build``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys

from setuptools import Command, Distribution, setup
from setuptools.command.build import build as _build

try:  # setuptools >= 70.1 ships bdist_wheel itself
    from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
except ImportError:  # pragma: no cover - older setuptools
    from wheel.bdist_wheel import bdist_wheel as _bdist_wheel

ROOT = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(ROOT, "include", "memtier.h")
GO_PACKAGE = "./capi"
GO_MIN = (1, 26)  # go.mod: go 1.26.0
LIB_NAME = "libmemtier.so"
LIB_SUBDIR = os.path.join("memtier", "_lib")
#: Go build tags when MEMTIER_GO_TAGS is unset (set it empty for a CPU-only build).
DEFAULT_GO_TAGS = "memtier_cuda,memtier_gds"


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


def _check_go(go: str) -> str:
    try:
        out = subprocess.run([go, "version"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise _go_missing(f"`{go} version` failed ({e})") from None
    m = re.search(r"go(\d+)\.(\d+)", out)
    if not m:
        raise _go_missing(f"cannot parse the output of `{go} version`: {out.strip()!r}")
    have = (int(m.group(1)), int(m.group(2)))
    if have < GO_MIN:
        raise _go_missing(f"found {out.strip()}, which is too old")
    return out.strip()


class build_go(Command):
    """Compile ./capi with ``go build -buildmode=c-shared`` into memtier/_lib/."""

    description = "build libmemtier.so with go build -buildmode=c-shared"
    user_options: list = []

    def initialize_options(self) -> None:
        self.build_lib = None
        self.editable_mode = False  # set by setuptools' editable_wheel (PEP 660)

    def finalize_options(self) -> None:
        self.set_undefined_options("build", ("build_lib", "build_lib"))

    def _target(self) -> str:
        if self.editable_mode:
            # Editable installs import the package from python/; the library
            # must sit beside its sources (python/memtier/_lib is git-ignored).
            return os.path.join(ROOT, "python", LIB_SUBDIR, LIB_NAME)
        return os.path.join(self.build_lib, LIB_SUBDIR, LIB_NAME)

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
        go = _find_go()
        if go is None:
            raise _go_missing("the `go` command was not found on PATH")
        version = _check_go(go)
        env = dict(os.environ)
        env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -buildvcs=false").strip()
        env["CGO_ENABLED"] = "1"
        inc = "-I" + os.path.join(ROOT, "include")
        # Go's build cache does not hash headers included from outside the
        # package folder; without the header's hash in CGO_CFLAGS (part of the
        # cache key) a header edit would reuse objects built against the old
        # header (cmake/RunGo.cmake does the same).
        with open(HEADER, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:16]
        env["CGO_CFLAGS"] = ((env.get("CGO_CFLAGS") or "-O2 -g") + " " + inc
                             + f" -DMEMTIER_H_SHA256_16=0x{digest}")
        cmd = [
            go, "build", "-buildmode=c-shared", "-trimpath",
            f"-ldflags=-extldflags=-Wl,-soname,{LIB_NAME}",
        ]
        tags = os.environ.get("MEMTIER_GO_TAGS")
        tags = DEFAULT_GO_TAGS if tags is None else tags.strip()
        if tags:
            cmd += ["-tags", tags]
        tmp = out + ".tmp"
        cmd += ["-o", tmp, GO_PACKAGE]
        self.announce(f"{version}: {' '.join(cmd)}", level=2)
        print(f"memtier: {' '.join(cmd)}", file=sys.stderr)
        try:
            subprocess.run(cmd, cwd=ROOT, env=env, check=True)
        except FileNotFoundError:
            raise _go_missing(f"cannot execute {go!r}") from None
        except subprocess.CalledProcessError as e:
            raise SystemExit(
                f"error: `{' '.join(cmd)}` failed with exit status {e.returncode} "
                f"(cgo needs a C compiler: gcc or clang on PATH, or CC=...)"
            ) from None
        os.replace(tmp, out)
        # cgo also writes a generated header next to the output (the output
        # name with its extension replaced by .h); the hand-written
        # include/memtier.h is the contract, so do not ship it.
        gen = os.path.splitext(tmp)[0] + ".h"
        if os.path.exists(gen):
            os.remove(gen)

    def get_outputs(self) -> list[str]:
        return [self._target()]

    def get_output_mapping(self) -> dict[str, str]:
        return {}

    def get_source_files(self) -> list[str]:
        return []


class build(_build):
    sub_commands = _build.sub_commands + [("build_go", None)]


class BinaryDistribution(Distribution):
    """Not pure: the package carries a shared library, so build and install
    use the platform lib directory (platlib) and the wheel root is not purelib."""

    def has_ext_modules(self) -> bool:
        return True


class bdist_wheel(_bdist_wheel):
    """A platform wheel that works on any Python 3: py3-none-<platform>."""

    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


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
    packages=["memtier", "memtier.safetensors"],
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
    distclass=BinaryDistribution,
    cmdclass={"build": build, "build_go": build_go, "bdist_wheel": bdist_wheel},
    options={"build": {"build_base": "build-py"}},
)
