"""memtier.integrations: ``patch_safetensors(views=True)`` and the patch's
module index (a module is scanned once; later starts visit its sites)."""

from __future__ import annotations

import json
import os
import struct
import sys
import types

import pytest

import memtier
from memtier.integrations import (counts, patch_safetensors, reset_counts, unpatch_safetensors,
                                  view_bytes)
from memtier.integrations import _views

st = pytest.importorskip("safetensors")


@pytest.fixture
def torch(torch):
    import safetensors.numpy  # noqa: F401
    import safetensors.torch  # noqa: F401

    return torch


@pytest.fixture(autouse=True)
def _patch_off():
    unpatch_safetensors()
    reset_counts()
    yield
    assert unpatch_safetensors() == 0, "a test left the patch on"


def _payload(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return 8 + n, sum(e - b for k, v in header.items() if k != "__metadata__"
                      for b, e in [v["data_offsets"]])


def _save(torch, path):
    import safetensors.torch as stt

    tensors = {"a": torch.arange(96, dtype=torch.int32).reshape(8, 12),
               "b": torch.full((5,), 2.5, dtype=torch.float64), "empty": torch.zeros(0, 3)}
    stt.save_file(tensors, str(path))
    return tensors


def _rewrite_first_int32(path, value):
    start, _ = _payload(path)
    offs = json.loads(open(path, "rb").read(start)[8:])["a"]["data_offsets"]
    with open(path, "r+b") as f:
        f.seek(start + offs[0])
        f.write(struct.pack("<i", value))


def test_views_safe_open_is_the_reference_and_counts_bytes(torch, tmp_path):
    import safetensors

    path = tmp_path / "m.safetensors"
    want = _save(torch, path)
    _, payload = _payload(path)
    original = safetensors.safe_open
    with memtier.Context() as ctx, patch_safetensors(ctx, views=True) as p:
        assert repr(p) == "<memtier.SafetensorsPatch on, views>"
        with safetensors.safe_open(str(path), framework="pt") as f:
            assert type(f) is original  # safetensors' own handle
            got = {k: f.get_tensor(k) for k in f.keys()}
            sl = f.get_slice("a")[2:4]
        assert ctx.stats().bytes == 0  # page faults read them, not MemTier's engine
    assert sorted(got) == sorted(want)
    for k, t in want.items():
        assert got[k].dtype == t.dtype and torch.equal(got[k], t), k
    assert torch.equal(sl, want["a"][2:4])
    assert counts() == {"served": {"safetensors.safe_open (views)": 1}, "fallback": {}}
    assert view_bytes() == {"safetensors.safe_open": payload} and payload == 96 * 4 + 5 * 8
    # the reference's contract: the views read the file's pages
    _rewrite_first_int32(path, -7)
    assert int(got["a"][0, 0]) == -7
    reset_counts()
    assert view_bytes() == {} and counts() == {"served": {}, "fallback": {}}


def test_views_load_file_and_copy_mode_owns_memory(torch, tmp_path):
    import safetensors.torch as stt

    path = tmp_path / "m.safetensors"
    want = _save(torch, path)
    _, payload = _payload(path)
    with memtier.Context() as ctx, patch_safetensors(ctx, views=True):
        viewed = stt.load_file(str(path))
        assert ctx.stats().bytes == 0
    with memtier.Context() as ctx, patch_safetensors(ctx):  # views=False: MemTier's copy
        owned = stt.load_file(str(path))
        assert ctx.stats().bytes == payload
    for k, t in want.items():
        assert torch.equal(viewed[k], t) and torch.equal(owned[k], t), k
    assert counts()["served"] == {"safetensors.torch.load_file (views)": 1,
                                  "safetensors.torch.load_file": 1}
    assert view_bytes() == {"safetensors.torch.load_file": payload}
    _rewrite_first_int32(path, 41)
    assert int(viewed["a"][0, 0]) == 41 and int(owned["a"][0, 0]) == 0


def test_views_leave_load_model_and_bad_files_to_memtier(torch, tmp_path):
    import safetensors
    import safetensors.torch as stt

    path = tmp_path / "m.safetensors"
    model = torch.nn.Linear(6, 3)
    stt.save_model(model, str(path))
    _, payload = _payload(path)
    fresh = torch.nn.Linear(6, 3)
    missing = tmp_path / "absent.safetensors"
    short = tmp_path / "short.safetensors"
    short.write_bytes(b"\x01\x02\x03")
    with memtier.Context() as ctx, patch_safetensors(ctx, views=True):
        assert stt.load_model(fresh, str(path)) == (set(), [])
        assert ctx.stats().bytes == payload
        with pytest.raises(FileNotFoundError):
            safetensors.safe_open(str(missing), framework="pt")
        with pytest.raises(safetensors.SafetensorError):
            safetensors.safe_open(str(short), framework="pt")
    assert torch.equal(fresh.weight, model.weight) and torch.equal(fresh.bias, model.bias)
    assert counts()["served"] == {"safetensors.torch.load_model": 1, "safetensors.safe_open": 2}
    assert view_bytes() == {}


def test_views_bad_argument():
    with pytest.raises(TypeError, match=r"^memtier.patch_safetensors: views must be None, True or False, "
                                        r"got 1$"):
        patch_safetensors(views=1)


def test_prepare_counts_payload_bytes(tmp_path):
    path = tmp_path / "x.safetensors"
    header = b'{"t":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}}'
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"abc")
    assert _views.prepare("f", str(path)) is True and view_bytes() == {"f": 3}
    assert _views.prepare("f", os.fsencode(path)) is True and view_bytes() == {"f": 6}
    assert _views.prepare("f", str(tmp_path / "nope")) is False
    assert _views.prepare("f", "s3://bucket/key.safetensors") is False
    assert _views.prepare("f", str(tmp_path)) is False  # a directory
    (tmp_path / "tiny").write_bytes(b"\x00" * 4)
    assert _views.prepare("f", str(tmp_path / "tiny")) is False
    (tmp_path / "neg").write_bytes(struct.pack("<Q", 99))
    assert _views.prepare("f", str(tmp_path / "neg")) is False
    assert _views.prepare("f", 12.5) is False
    assert view_bytes() == {"f": 6}


@pytest.mark.parametrize("value,mode", [("views", "True"), ("copy", "False"), ("1", "None")])
def test_env_switch_views(run_py, tmp_path, value, mode):
    r = run_py("""
        import memtier
        from memtier.integrations import _patch
        p = _patch._env_patch
        print(p.active, p.views)
    """, env={"MEMTIER_PATCH_SAFETENSORS": value})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"True {mode}"


def test_default_mode_views_safe_open_only(torch, tmp_path):
    """patch_safetensors() (views=None): safe_open on the CPU is the reference's
    handle (mmap views, bytes counted), load_file is MemTier's (owned tensors);
    views=False serves safe_open with MemTier too."""
    import safetensors
    import safetensors.torch as stt

    path = tmp_path / "m.safetensors"
    want = _save(torch, path)
    _, payload = _payload(path)
    original = safetensors.safe_open
    with memtier.Context() as ctx, patch_safetensors(ctx) as p:
        assert repr(p) == "<memtier.SafetensorsPatch on>" and p.views is None
        with safetensors.safe_open(str(path), framework="pt") as f:
            assert type(f) is original
            viewed = {k: f.get_slice(k)[...] for k in f.keys()}
        assert ctx.stats().bytes == 0
        owned = stt.load_file(str(path))
        assert ctx.stats().bytes == payload
    with memtier.Context() as ctx, patch_safetensors(ctx, views=False) as p:
        assert repr(p) == "<memtier.SafetensorsPatch on, copy>"
        with safetensors.safe_open(str(path), framework="pt") as f:
            assert isinstance(f, memtier.safetensors.safe_open)
            copied = {k: f.get_tensor(k) for k in f.keys()}
        assert ctx.stats().bytes == payload
    for k, t in want.items():
        assert torch.equal(viewed[k], t) and torch.equal(owned[k], t) and torch.equal(copied[k], t), k
    assert counts()["served"] == {"safetensors.safe_open (views)": 1, "safetensors.torch.load_file": 1,
                                  "safetensors.safe_open": 1}
    assert view_bytes() == {"safetensors.safe_open": payload}
    _rewrite_first_int32(path, 9)  # the reference's contract for the views only
    assert int(viewed["a"][0, 0]) == 9 and int(owned["a"][0, 0]) == 0 and int(copied["a"][0, 0]) == 0


def test_scan_names_and_scan_all(torch, tmp_path):
    """scan="names" (the default) patches the names of NAMES only; scan="all"
    finds any alias, scans a module once and revisits its site on later
    starts; a module that appears (or is replaced in sys.modules) later is
    scanned when the next start or stop sees it."""
    import safetensors
    from memtier.integrations import _patch

    original = safetensors.safe_open
    user = types.ModuleType("memtier_test_index_user")
    user.opener = original  # an alias outside NAMES
    user.safe_load_file = original  # a name of NAMES
    sys.modules[user.__name__] = user
    try:
        with patch_safetensors():
            assert user.opener is original
            assert getattr(user.safe_load_file, "__memtier_original__", None) is original
        assert user.safe_load_file is original
        assert _patch._sites[user.__name__] == (id(user), False, ("safe_load_file",))
        user.load_file = original  # bound after the scan, at a name it did not have: not found
        with patch_safetensors():
            assert getattr(user.safe_load_file, "__memtier_original__", None) is original
            assert user.load_file is original
        assert user.safe_load_file is original
        del user.load_file
        with patch_safetensors(scan="all"):
            assert getattr(user.opener, "__memtier_original__", None) is original
        assert user.opener is original and user.safe_load_file is original
        assert _patch._sites[user.__name__] == (id(user), True, ("opener", "safe_load_file"))
        with patch_safetensors(scan="all"):  # the recorded sites, not a new scan
            assert getattr(user.opener, "__memtier_original__", None) is original
        assert user.opener is original
        again = types.ModuleType(user.__name__)  # replaced in sys.modules: scanned again
        again.other_name = original
        sys.modules[user.__name__] = again
        with patch_safetensors(scan="all"):
            assert getattr(again.other_name, "__memtier_original__", None) is original
        assert again.other_name is original
        assert _patch._sites[user.__name__] == (id(again), True, ("other_name",))
        assert user.__name__ in _patch._hits
        empty = types.ModuleType(user.__name__)  # replaced by one without a site: no longer visited
        sys.modules[user.__name__] = empty
        with patch_safetensors(scan="all"):
            pass
        assert _patch._sites[user.__name__] == (id(empty), True, ())
        assert user.__name__ not in _patch._hits
        assert set(_patch._hits) == {n for n, (_, _, a) in _patch._sites.items() if a}
    finally:
        sys.modules.pop(user.__name__, None)


def test_scan_bad_argument():
    with pytest.raises(ValueError, match=r"^memtier.patch_safetensors: scan must be 'names' or "
                                         r"'all', got 'some'$"):
        patch_safetensors(scan="some")


def test_bind_takes_the_reference_signatures():
    """The stand-ins read a call's arguments by the reference's signatures:
    defaults filled, None for a call those signatures refuse."""
    from memtier.integrations._routes import _bind

    assert _bind("safe_open", ("f", "pt"), {}) == {
        "filename": "f", "framework": "pt", "device": "cpu", "backend": "mmap"}
    assert _bind("safe_open", ("f",), {"framework": "np", "device": 0, "backend": "pread"}) == {
        "filename": "f", "framework": "np", "device": 0, "backend": "pread"}
    assert _bind("safe_open", ("f", "pt", "cpu", "mmap"), {}) is None  # backend is keyword-only
    assert _bind("safe_open", ("f",), {}) is None
    assert _bind("safe_open", ("f", "pt"), {"bogus": 1}) is None
    assert _bind("safe_open", ("f", "pt"), {"filename": "g"}) is None
    assert _bind("load_file_pt", ("f", "cuda:1"), {}) == {"filename": "f", "device": "cuda:1", "backend": "mmap"}
    assert _bind("load_file_np", ("f",), {"backend": "pread"}) == {"filename": "f", "backend": "pread"}
    assert _bind("load_file_np", ("f", "cpu"), {}) is None  # numpy's load_file has no device
    m = object()
    assert _bind("load_model", (m, "f"), {"strict": False}) == {
        "model": m, "filename": "f", "strict": False, "device": "cpu", "backend": "mmap"}
    assert _bind("load_model", (m,), {}) is None


@pytest.mark.parametrize("value,order,want", [
    ("copy", "before", "True True True"),   # imported when the patch starts
    ("copy", "after", "False True True"),   # imported when safetensors is
    ("1", "before", "False False True"),    # the default mode's safe_open are views
])
def test_copy_mode_imports_memtier_safetensors_early(run_py, value, order, want):
    """views=False serves every safe_open with memtier.safetensors, so its
    import is made when the patch starts (safetensors loaded) or when
    safetensors is imported, not in the first load; the library stays unloaded."""
    r = run_py("""
        import sys
        if sys.argv[1] == "before":
            import safetensors
        import memtier
        from memtier import _ffi
        at_start = "memtier.safetensors" in sys.modules
        import safetensors
        print(at_start, "memtier.safetensors" in sys.modules, _ffi._runtime is None)
    """, env={"MEMTIER_PATCH_SAFETENSORS": value}, args=(order,))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == want
