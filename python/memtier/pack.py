"""Pack a directory of files into one MemTier dataset: ``python -m memtier.pack SRC OUT_PREFIX``.

Every regular file under ``SRC`` (recursively; symbolic links to regular files
are followed, symbolic links to directories are not descended into) becomes one
sample. The outputs are:

``OUT_PREFIX.data``
    The files' bytes, concatenated in sample order, nothing in between.
``OUT_PREFIX.idx``
    The MemTier dataset index in its text form (see README "Dataset index
    format", :mod:`memtier._index`): a ``#`` comment line, then one line
    ``offset length`` (decimal bytes) per sample, in sample order. It is what
    :class:`memtier.MemTierDataset` (``MemTierDataset(OUT_PREFIX.idx,
    OUT_PREFIX.data)``) and ``memtier_dataset_open`` read.
``OUT_PREFIX.manifest.json``
    ``{"format": "memtier-pack", "version": 1, "data": ..., "index": ...,
    "samples": N, "bytes": total, "shuffle_seed": seed or null, "files":
    [relative path of sample 0, of sample 1, ...]}``: the source of each
    sample, as a path relative to ``SRC`` with ``/`` separators (names that
    are not valid UTF-8 keep their bytes as surrogate escapes, as
    ``os.fsdecode`` gives them).

Order: sorted by relative path (code point order of the ``/``-separated
path), or, with ``--shuffle-seed N``, that sorted list permuted by a
Fisher-Yates shuffle driven by SplitMix64 seeded with N (a generator fixed
here, so the order does not depend on the Python or numpy version).

Reproducible: the same input tree (names and contents) and options give
byte-identical outputs; no timestamps or absolute paths are written.

Atomic: each output is written to a temporary file next to it and renamed
into place when complete (data, then index, then manifest last); an
interrupted run leaves no partial output under the final names (only
``*.tmp-<pid>`` files it removes on failure). Contents are streamed in
chunks (``os.copy_file_range`` when the kernel allows, else 1 MiB reads), so
memory use does not grow with the input.

A progress bar (tqdm, on stderr) is shown when tqdm is importable, unless
``--quiet``, when stderr is a terminal or the input is large (more than 1000
files or 1 GiB); without tqdm nothing is printed.

Exit status: 0 on success; 1 with a one-line ``memtier.pack: error: ...``
on stderr for a missing or empty ``SRC``, an unwritable ``OUT_PREFIX``, or an
I/O error; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import stat as _stat
import sys
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

__all__ = ["pack", "PackResult", "PackError", "shuffle_order", "main"]

MANIFEST_FORMAT = "memtier-pack"
MANIFEST_VERSION = 1
_COPY_BYTES = 1 << 20
_LARGE_FILES = 1000
_LARGE_BYTES = 1 << 30


class PackError(Exception):
    """Packing failed: the message says why (missing/empty SRC, unwritable output, I/O)."""


@dataclass(frozen=True)
class PackResult:
    """What :func:`pack` wrote.

    Attributes
    ----------
    data_path, index_path, manifest_path : str
        The three outputs.
    samples : int
        Number of samples (files packed).
    bytes : int
        Size of the data file in bytes.
    files : list of str
        Relative source path of each sample, in sample order.
    """

    data_path: str
    index_path: str
    manifest_path: str
    samples: int
    bytes: int
    files: List[str]


def _splitmix64(state: int) -> Tuple[int, int]:
    state = (state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return state, z ^ (z >> 31)


def shuffle_order(n: int, seed: int) -> List[int]:
    """A permutation of ``range(n)`` fixed by ``seed`` (Fisher-Yates, SplitMix64,
    rejection sampling for unbiased bounds); the same for every Python version."""
    order = list(range(n))
    state = seed & 0xFFFFFFFFFFFFFFFF
    for i in range(n - 1, 0, -1):
        bound = i + 1
        limit = (1 << 64) - ((1 << 64) % bound)
        while True:
            state, r = _splitmix64(state)
            if r < limit:
                break
        j = r % bound
        order[i], order[j] = order[j], order[i]
    return order


def _walk(src: str, exclude: Sequence[str]) -> List[Tuple[str, str, int]]:
    """(relative '/' path, absolute path, size) of every regular file under src, sorted."""
    out: List[Tuple[str, str, int]] = []
    skip = {os.path.realpath(p) for p in exclude}
    errors: List[OSError] = []

    def onerror(e: OSError) -> None:
        errors.append(e)

    for dirpath, dirnames, filenames in os.walk(src, onerror=onerror, followlinks=False):
        dirnames.sort()
        for name in filenames:  # links to directories are in dirnames and not followed
            full = os.path.join(dirpath, name)
            try:
                st = os.stat(full)  # follows links: a link to a regular file is packed
            except OSError as e:
                if os.path.islink(full):
                    continue  # a dangling link is not a file
                raise PackError(f"cannot stat {full}: {e.strerror or e}") from None
            if not _stat.S_ISREG(st.st_mode):
                continue
            if os.path.realpath(full) in skip:
                continue
            rel = os.path.relpath(full, src).replace(os.sep, "/")
            out.append((rel, full, st.st_size))
    if errors:
        e = errors[0]
        raise PackError(f"cannot read directory {e.filename}: {e.strerror or e}")
    out.sort(key=lambda t: t[0])
    return out


def _copy(fin: int, fout: int, out_file: Any) -> int:
    """Append all of fin to fout; returns bytes copied."""
    total = 0
    use_cfr = hasattr(os, "copy_file_range")
    while True:
        if use_cfr:
            try:
                n = os.copy_file_range(fin, fout, 1 << 30)
            except OSError:
                use_cfr = False  # cross-device on old kernels, unsupported fs: plain copy
                continue
        else:
            data = os.read(fin, _COPY_BYTES)
            n = len(data)
            if n:
                view = memoryview(data)
                while view:
                    w = os.write(fout, view)
                    view = view[w:]
        if n == 0:
            return total
        total += n
        if out_file is not None:
            out_file.update(n)


def _progress(quiet: bool, files: int, nbytes: int) -> Any:
    if quiet:
        return None
    if not (sys.stderr.isatty() or files > _LARGE_FILES or nbytes > _LARGE_BYTES):
        return None
    try:
        from tqdm import tqdm
    except Exception:
        return None
    return tqdm(total=nbytes, unit="B", unit_scale=True, unit_divisor=1024, desc="memtier.pack",
                file=sys.stderr, dynamic_ncols=True)


def _tmp(path: str) -> str:
    return f"{path}.tmp-{os.getpid()}"


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def pack(src: "os.PathLike[str] | str", out_prefix: "os.PathLike[str] | str", *,
         shuffle_seed: Optional[int] = None, quiet: bool = True) -> PackResult:
    """Pack every regular file under ``src`` into ``out_prefix.{data,idx,manifest.json}``.

    Parameters
    ----------
    src : str or os.PathLike
        A directory.
    out_prefix : str or os.PathLike
        Output path prefix; its directory must exist and be writable. Outputs
        inside ``src`` are excluded from the input.
    shuffle_seed : int, optional
        Sample order: sorted by relative path (None) or that order shuffled
        reproducibly with this seed (see :func:`shuffle_order`).
    quiet : bool
        False shows a tqdm progress bar (if tqdm is importable) under the
        conditions of the module docstring.

    Returns
    -------
    PackResult

    Raises
    ------
    PackError
        ``src`` is missing, not a directory or holds no regular file; an
        output cannot be written; a file cannot be read.

    Notes
    -----
    Pure Python (does not load libmemtier.so). Not thread-safe for the same
    ``out_prefix``.
    """
    src = os.fspath(src)
    prefix = os.fspath(out_prefix)
    if not os.path.exists(src):
        raise PackError(f"SRC {src!r} does not exist")
    if not os.path.isdir(src):
        raise PackError(f"SRC {src!r} is not a directory")
    data_path, index_path, manifest_path = prefix + ".data", prefix + ".idx", prefix + ".manifest.json"
    outs = [data_path, index_path, manifest_path]
    out_dir = os.path.dirname(os.path.abspath(prefix))
    if not os.path.isdir(out_dir):
        raise PackError(f"cannot write {data_path!r}: directory {out_dir!r} does not exist")
    for p in outs:
        if os.path.isdir(p):
            raise PackError(f"cannot write {p!r}: it is a directory")
    files = _walk(src, outs + [_tmp(p) for p in outs])
    if not files:
        raise PackError(f"SRC {src!r} holds no regular file to pack")
    order = list(range(len(files)))
    if shuffle_seed is not None:
        order = shuffle_order(len(files), int(shuffle_seed))
    total_in = sum(f[2] for f in files)
    bar = _progress(quiet, len(files), total_in)
    tmps = [_tmp(p) for p in outs]
    try:
        try:
            fout = os.open(tmps[0], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as e:
            raise PackError(f"cannot write {data_path!r}: {e.strerror or e}") from None
        lines = ["# memtier.pack index: one 'offset length' line per sample, in bytes\n"]
        names: List[str] = []
        pos = 0
        try:
            for k in order:
                rel, full, _ = files[k]
                try:
                    fin = os.open(full, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                except OSError as e:
                    raise PackError(f"cannot read {full!r}: {e.strerror or e}") from None
                try:
                    n = _copy(fin, fout, bar)
                except OSError as e:
                    raise PackError(f"copying {full!r} into {data_path!r}: {e.strerror or e}") from None
                finally:
                    os.close(fin)
                lines.append(f"{pos} {n}\n")
                names.append(rel)
                pos += n
            os.fsync(fout)
        finally:
            os.close(fout)
        manifest = {
            "format": MANIFEST_FORMAT,
            "version": MANIFEST_VERSION,
            "data": os.path.basename(data_path),
            "index": os.path.basename(index_path),
            "samples": len(names),
            "bytes": pos,
            "shuffle_seed": None if shuffle_seed is None else int(shuffle_seed),
            "files": names,
        }
        try:
            _write_text(tmps[1], "".join(lines))
            _write_text(tmps[2], json.dumps(manifest, indent=1, ensure_ascii=True) + "\n")
            for t, p in zip(tmps, outs):
                os.replace(t, p)
        except OSError as e:
            raise PackError(f"cannot write {e.filename or prefix!r}: {e.strerror or e}") from None
    except BaseException:
        for t in tmps:
            try:
                os.unlink(t)
            except OSError:
                pass
        raise
    finally:
        if bar is not None:
            bar.close()
    return PackResult(data_path, index_path, manifest_path, len(names), pos, names)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Command-line entry point (``python -m memtier.pack``); returns the exit status."""
    ap = argparse.ArgumentParser(
        prog="python -m memtier.pack",
        description="Pack every regular file under SRC into OUT_PREFIX.data (concatenated), "
        "OUT_PREFIX.idx (MemTier index: 'offset length' per sample) and "
        "OUT_PREFIX.manifest.json (sample -> relative source path), for MemTierDataset.",
    )
    ap.add_argument("src", metavar="SRC", help="directory to pack (recursively)")
    ap.add_argument("out_prefix", metavar="OUT_PREFIX", help="output path prefix")
    ap.add_argument("--shuffle-seed", type=int, default=None, metavar="N",
                    help="shuffle the sample order reproducibly with seed N (default: sorted by path)")
    ap.add_argument("--quiet", "-q", action="store_true", help="no progress bar or summary")
    args = ap.parse_args(argv)
    try:
        res = pack(args.src, args.out_prefix, shuffle_seed=args.shuffle_seed, quiet=args.quiet)
    except PackError as e:
        print(f"memtier.pack: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("memtier.pack: interrupted", file=sys.stderr)
        return 130
    if not args.quiet:
        print(f"memtier.pack: {res.samples} files, {res.bytes} bytes -> {res.data_path}, "
              f"{res.index_path}, {res.manifest_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
