"""The address-space check made before libmemtier.so is loaded (field case N05).

libmemtier.so is a Go runtime. When it starts, Go reserves address space for its
page allocator's summaries and scavenger index, its first heap arena and the
arena map, and each thread it starts reserves a stack; every thread that calls
``malloc`` also gets a glibc arena. Under ``RLIMIT_AS`` (``ulimit -v``) a
reservation that fails is a Go *fatal error*, not an error return: the
interpreter ends with exit status 2 (or 134 from ``abort``), and no ``try``
can catch it (golang/go#35568, https://github.com/golang/go/issues/35568, and
golang/go#16843, https://github.com/golang/go/issues/16843).

So the loader calls :func:`check_address_space` just before ``dlopen``: when the
soft ``RLIMIT_AS`` leaves less than :data:`AS_HEADROOM_BYTES` above the
process's current ``VmSize``, it raises :class:`memtier.LibraryLoadError`
instead of loading a runtime that may kill the process.

Measured on Linux x86-64, Go 1.26, 2 CPUs (numpy imported, then numpy and
torch): the first ``memtier.read`` with no limit grew ``VmSize`` by 1,611 MiB
(1,649,700 kB with numpy, 1,648,916 kB with torch), of which 54 MiB at
``dlopen`` and the rest when the runtime started. Under a limit, headroom of
800 MiB or less always ended in a fatal error; from 825 to 1,400 MiB the
outcome varied with the run (a thread's stack or a heap arena failing after
glibc's arenas took the space: 2 of 12 runs died at 1,400 MiB, 12 of 12 at
1,300 MiB); 1,450 MiB and above passed every run. :data:`AS_HEADROOM_BYTES`
is the unlimited growth plus a margin of about 25% for machines with more CPUs
(more threads, more arenas).
"""

from __future__ import annotations

from typing import Optional, Tuple

from . import _errors

#: Address space, in bytes, that must be free under ``RLIMIT_AS`` for the
#: library to load and make its first read: 2 GiB (measured growth 1,611 MiB
#: plus a margin; see the module docstring).
AS_HEADROOM_BYTES = 2 << 30

#: The library's file name, looked for in /proc/self/maps: a library that is
#: already mapped (``LD_PRELOAD``) has its runtime started, so no check applies.
_LIB_NAME = "libmemtier.so"


def headroom_message(limit_bytes: int, vmsize_kib: int,
                     needed_bytes: int = AS_HEADROOM_BYTES) -> Optional[str]:
    """The refusal text for a soft ``RLIMIT_AS`` of ``limit_bytes`` (bytes)
    and a current ``VmSize`` of ``vmsize_kib`` (KiB, as /proc reports it and
    ``ulimit -v`` takes it), or ``None`` when at least ``needed_bytes`` (bytes)
    are left. Pure function: reads nothing, thread safe.
    """
    left = limit_bytes - vmsize_kib * 1024
    if left >= needed_bytes:
        return None
    limit_kib = limit_bytes // 1024
    need_kib = needed_bytes // 1024
    return (
        f"memtier: not loading libmemtier.so: RLIMIT_AS (ulimit -v) is {limit_kib} kB and "
        f"this process's VmSize is already {vmsize_kib} kB, leaving {max(left, 0) // 1024} kB; "
        f"the library's Go runtime needs about {need_kib} kB ({needed_bytes >> 20} MiB) of "
        f"address space above VmSize, and a reservation that fails there ends the process "
        f"with a Go fatal error; run with `ulimit -v unlimited`, or with `ulimit -v` at "
        f"least {vmsize_kib + need_kib} kB, or bound memory with `ulimit -d` (RLIMIT_DATA) "
        f"instead, which the runtime tolerates"
    )


def _address_space() -> Optional[Tuple[int, int]]:
    """(soft RLIMIT_AS in bytes, VmSize in KiB), or None when there is no
    finite limit or either value cannot be read (not Linux, no /proc)."""
    try:
        import resource
    except ImportError:  # not a Unix
        return None
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return soft, int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _already_mapped() -> bool:
    """Whether libmemtier.so is mapped in this process already (LD_PRELOAD)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            return any(line.rstrip().endswith("/" + _LIB_NAME) for line in f)
    except OSError:
        return False


def check_address_space(needed_bytes: int = AS_HEADROOM_BYTES) -> None:
    """Refuse to load the library when ``RLIMIT_AS`` leaves too little room.

    Call it just before ``dlopen``. Cheap when there is no limit (one
    ``getrlimit``); with a finite soft limit it reads /proc/self/status.

    Parameters
    ----------
    needed_bytes : int
        Address space, in bytes, the library needs above the current VmSize
        (default :data:`AS_HEADROOM_BYTES`).

    Raises
    ------
    LibraryLoadError
        The soft ``RLIMIT_AS`` minus the current ``VmSize`` is below
        ``needed_bytes`` and the library is not mapped yet. The message names
        ``RLIMIT_AS``, the current VmSize, the headroom needed, and suggests
        ``ulimit -v unlimited`` or ``ulimit -d``.

    Thread safety: safe to call from any thread; it only reads process state.
    """
    got = _address_space()
    if got is None:
        return
    msg = headroom_message(got[0], got[1], needed_bytes)
    if msg is not None and not _already_mapped():
        raise _errors.LibraryLoadError(msg)


__all__ = ["AS_HEADROOM_BYTES", "check_address_space", "headroom_message"]

