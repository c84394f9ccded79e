"""memtier.safetensors.load_into / load_model, and load_file's per-tensor memory (issue 12, items 1-2)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import memtier
import memtier.safetensors as mts

st = pytest.importorskip("safetensors")


@pytest.fixture
def torch(torch):
    import safetensors.torch  # noqa: F401

    import memtier.safetensors.torch  # noqa: F401

    return torch


def _model(torch, tied: bool = False):
    torch.manual_seed(0)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(50, 16)
            self.lin = torch.nn.Linear(16, 8)
            self.head = torch.nn.Linear(16, 50, bias=False)
            self.register_buffer("steps", torch.arange(5, dtype=torch.int64))
            if tied:
                self.head.weight = self.emb.weight

    return M()


def _same(a, b) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for k in sa:
        assert sa[k].dtype == sb[k].dtype and bytes(sa[k].contiguous().view(-1).view(__import__("torch").uint8).numpy()) == \
            bytes(sb[k].contiguous().view(-1).view(__import__("torch").uint8).numpy()), k


def test_load_into_module_writes_in_place(tmp_path, torch):
    src, dst = _model(torch), _model(torch)
    with torch.no_grad():
        for p in dst.parameters():
            p.zero_()
    path = str(tmp_path / "m.safetensors")
    st.torch.save_model(src, path)
    ptrs = {k: v.data_ptr() for k, v in dst.state_dict().items()}
    res = mts.load_into(dst, path)
    assert res == ([], []) and res.missing_keys == [] and res.unexpected_keys == []
    assert {k: v.data_ptr() for k, v in dst.state_dict().items()} == ptrs  # same storage
    _same(src, dst)


def test_load_into_non_contiguous_through_small_staging(tmp_path, torch):
    w = torch.arange(64 * 48, dtype=torch.float32).reshape(64, 48)
    path = str(tmp_path / "t.safetensors")
    st.torch.save_file({"w": w, "b": torch.arange(7, dtype=torch.int16)}, path)
    big = torch.zeros(48, 64)
    dst = {"w": big.t(), "b": torch.zeros(14, dtype=torch.int16)[::2]}
    assert not dst["w"].is_contiguous() and not dst["b"].is_contiguous()
    mts.load_into(dst, path, staging_bytes=1000)  # < one row of w: pieces of rows
    assert torch.equal(dst["w"], w) and torch.equal(dst["b"], torch.arange(7, dtype=torch.int16))
    np_dst = {"w": np.zeros((48, 64), np.float32).T, "b": np.zeros(7, np.int16)}
    mts.load_into(np_dst, path, staging_bytes=4096)
    assert np.array_equal(np_dst["w"], w.numpy()) and np_dst["b"].tolist() == list(range(7))


def test_load_into_checks_before_writing(tmp_path, torch):
    path = str(tmp_path / "t.safetensors")
    st.torch.save_file({"a": torch.ones(3), "b": torch.ones(2, dtype=torch.float16)}, path)
    for dst, phrase in (({"a": torch.zeros(4), "b": torch.zeros(2, dtype=torch.float16)},
                         "size mismatch for a: copying a param with shape [3] from checkpoint, "
                         "the shape in current model is [4]"),
                        ({"a": torch.zeros(3), "b": torch.zeros(2)},
                         "dtype mismatch for b: the checkpoint holds F16 (float16), the destination is float32")):
        with pytest.raises(mts.StateDictError) as ei:
            mts.load_into(dst, path)
        assert phrase in str(ei.value)
        assert isinstance(ei.value, RuntimeError) and isinstance(ei.value, st.SafetensorError)
        assert float(dst["a"].sum()) == 0.0  # nothing written
    dst = {"a": torch.zeros(3), "c": torch.zeros(1)}
    with pytest.raises(RuntimeError) as ei:
        mts.load_into(dst, path)
    assert str(ei.value) == ('Error(s) in loading state_dict for dict:\n    Missing key(s) in state_dict: "c"'
                             '\n    Unexpected key(s) in state_dict: "b"')
    assert float(dst["a"].sum()) == 0.0
    assert mts.load_into(dst, path, strict=False) == (["c"], ["b"])
    assert dst["a"].tolist() == [1.0, 1.0, 1.0]


def test_load_into_sharded_index(tmp_path, torch):
    src = _model(torch)
    sd = src.state_dict()
    names = list(sd)
    shards = {"model-00001-of-00002.safetensors": names[:2], "model-00002-of-00002.safetensors": names[2:]}
    wm = {}
    for fn, ns in shards.items():
        st.torch.save_file({n: sd[n].contiguous() for n in ns}, str(tmp_path / fn))
        wm.update({n: fn for n in ns})
    idx = tmp_path / "model.safetensors.index.json"
    idx.write_text(json.dumps({"metadata": {}, "weight_map": wm}))
    dst = _model(torch)
    with torch.no_grad():
        for p in dst.parameters():
            p.zero_()
    assert mts.load_into(dst, idx) == ([], [])
    _same(src, dst)
    wm[names[0]] = "model-00002-of-00002.safetensors"  # the index names a shard that lacks it
    idx.write_text(json.dumps({"weight_map": wm}))
    with pytest.raises(memtier.FormatError, match="that the index assigns to it"):
        mts.load_into(dst, idx)


@pytest.mark.parametrize("tied,file_has_both", [(False, False), (True, False), (True, True)])
def test_load_model_matches_reference(tmp_path, torch, tied, file_has_both):
    src = _model(torch, tied)
    path = str(tmp_path / "m.safetensors")
    if file_has_both:
        sd = {k: v.clone().contiguous() for k, v in src.state_dict().items()}
        st.torch.save_file(sd, path)
    else:
        st.torch.save_model(src, path)
    ref_m, got_m = _model(torch, tied), _model(torch, tied)
    with torch.no_grad():
        for m in (ref_m, got_m):
            for p in m.parameters():
                p.zero_()
    ref = st.torch.load_model(ref_m, path, strict=False)
    got = mts.torch.load_model(got_m, path, strict=False)
    assert got[0] == set(ref[0]) and sorted(got[1]) == sorted(ref[1])
    _same(ref_m, got_m)
    r_err = g_err = None
    try:
        st.torch.load_model(_model(torch, tied), path)
    except RuntimeError as e:
        r_err = str(e)
    try:
        mts.torch.load_model(_model(torch, tied), path)
    except RuntimeError as e:
        g_err = str(e)
    assert g_err == r_err


def test_load_file_tensor_holds_only_its_memory(tmp_path, run_py, has_torch):
    """Keep one small tensor of a ~100 MB load_file result: RSS drops by most of the file."""
    if not has_torch:
        pytest.skip("torch results need torch (not importable or disabled in this run)")
    path = str(tmp_path / "big.safetensors")
    r = run_py(f"""
        import gc, os, torch, safetensors.torch as st
        st.save_file({{"small": torch.arange(512, dtype=torch.float32),
                       **{{f"w{{i}}": torch.full((1 << 20,), float(i)) for i in range(24)}}}}, {path!r})
        import memtier.safetensors as mts
        def rss():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        before = rss()
        d = mts.load_file({path!r})
        loaded = rss()
        small = d.pop("small")
        del d
        gc.collect()
        after = rss()
        assert small.untyped_storage().nbytes() == small.numel() * small.element_size() == 2048
        assert small.tolist() == list(range(512))
        print(loaded - before, loaded - after)
    """, timeout=180)
    assert r.returncode == 0, r.stderr
    grew, dropped = map(int, r.stdout.split()[-2:])
    size = 24 << 22
    assert grew > size * 0.9, (grew, size)
    assert dropped > size * 0.9, f"RSS dropped {dropped} of {grew} bytes"


def test_load_model_opens_each_file_once(tmp_path, torch, monkeypatch):
    """load_model reads the file's names and its tensors through one handle
    (and a sharded index's shards once each), and closes all of them."""
    from memtier.safetensors import _into

    src = _model(torch)
    sd = src.state_dict()
    one = tmp_path / "one.safetensors"
    st.torch.save_file({k: v.contiguous() for k, v in sd.items()}, str(one))
    names = list(sd)
    wm = {n: ("a.safetensors" if i < 2 else "b.safetensors") for i, n in enumerate(names)}
    for fn in ("a.safetensors", "b.safetensors"):
        st.torch.save_file({n: sd[n].contiguous() for n in names if wm[n] == fn}, str(tmp_path / fn))
    idx = tmp_path / "model.safetensors.index.json"
    idx.write_text(json.dumps({"weight_map": wm}))
    opened = []
    real = _into.open_handle

    def counting(c, path, where):
        h = real(c, path, where)
        opened.append((os.path.basename(path), h))
        return h

    monkeypatch.setattr(_into, "open_handle", counting)
    for target, want in ((one, ["one.safetensors"]), (idx, ["a.safetensors", "b.safetensors"])):
        opened.clear()
        dst = _model(torch)
        with torch.no_grad():
            for p in dst.parameters():
                p.zero_()
        assert mts.load_model(dst, target) == (set(), [])
        _same(src, dst)
        assert sorted(n for n, _ in opened) == want
        assert all(h.h is None for _, h in opened)  # closed


def test_load_model_mismatches_in_the_references_order(tmp_path, torch):
    # The file holds 1.bias before 1.weight (data-offset order); load_state_dict,
    # and so safetensors' load_model, lists a module's mismatches in its
    # state_dict order: 1.weight first.
    import re

    import safetensors.torch as stt

    path = str(tmp_path / "m.safetensors")
    stt.save_model(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 3)), path)
    with open(path, "rb") as f:
        head = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    head.pop("__metadata__", None)
    names = sorted(head, key=lambda k: head[k]["data_offsets"])
    assert names.index("1.bias") < names.index("1.weight")  # the case this test is about
    got = {}
    for which, fn in (("memtier", mts.load_model), ("reference", stt.load_model)):
        with pytest.raises(RuntimeError) as ei:
            fn(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 5)), path)
        got[which] = re.findall(r"size mismatch for (\S+):", str(ei.value))
    assert got["memtier"] == got["reference"] == ["1.weight", "1.bias"]
