"""memtier.integrations: the safetensors patch (with transformers) and the DCP reader (issue 12, item 3)."""

from __future__ import annotations

import io
import json
import os
import struct
import sys
import types

import numpy as np
import pytest

import memtier
from memtier.integrations import (counts, is_patched, patch_safetensors, reset_counts,
                                  unpatch_safetensors, view_bytes)

st = pytest.importorskip("safetensors")

# (module, attribute) the patch replaces in safetensors itself
TARGETS = (("safetensors", "safe_open"), ("safetensors.torch", "load_file"),
           ("safetensors.torch", "load_model"), ("safetensors.numpy", "load_file"))


@pytest.fixture
def torch(torch):
    import safetensors.numpy  # noqa: F401
    import safetensors.torch  # noqa: F401

    return torch


@pytest.fixture(autouse=True)
def _patch_off():
    """Every test starts and ends with the patch off and the counts zero."""
    unpatch_safetensors()
    reset_counts()
    yield
    assert unpatch_safetensors() == 0, "a test left the patch on"


def _originals():
    return {(m, a): sys.modules[m].__dict__[a] for m, a in TARGETS if m in sys.modules}


def _bindings(originals):
    """{(module name, attribute): object} for every module-level name in a
    loaded module bound to one of ``originals`` (what the patch must restore)."""
    ids = {id(v) for v in originals.values()}
    out = {}
    for name, mod in list(sys.modules.items()):
        d = getattr(mod, "__dict__", None) if mod is not None else None
        if isinstance(d, dict):
            for k, v in list(d.items()):
                if id(v) in ids:
                    out[(name, k)] = v
    return out


def _payload_bytes(path):
    """Sum of the tensors' byte sizes in a safetensors file, from its header."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return sum(e - b for k, v in header.items() if k != "__metadata__"
               for b, e in [v["data_offsets"]])


def _save(torch, path, seed=0, bf16=True):
    import safetensors.torch as stt

    g = torch.Generator().manual_seed(seed)
    tensors = {"a": torch.randn(64, 33, generator=g), "b": torch.randint(0, 9, (17,), generator=g),
               "empty": torch.zeros(0, 4)}
    if bf16:  # safetensors.numpy refuses BF16
        tensors["c"] = torch.randn(5, 7, generator=g).to(torch.bfloat16)
    stt.save_file(tensors, str(path), metadata={"k": "v"})
    return tensors


def _is_standin(obj):
    return getattr(obj, "__memtier_original__", None) is not None


# ---- the patch, without transformers ------------------------------------------------------


def test_patch_routes_load_file_and_restores(torch, tmp_path):
    import safetensors.torch as stt

    path = tmp_path / "m.safetensors"
    saved = _save(torch, path)
    before = _originals()
    bound = _bindings(before)
    with memtier.Context() as ctx, patch_safetensors(ctx) as p:
        assert p.active and is_patched()
        for (m, a), orig in before.items():
            now = sys.modules[m].__dict__[a]
            assert now is not orig and now.__memtier_original__ is orig
        got = stt.load_file(str(path))
        assert ctx.stats().bytes == _payload_bytes(path) == sum(t.nbytes for t in saved.values())
    assert not p.active and not is_patched()
    assert _originals() == before and all(
        sys.modules[m].__dict__[a] is v for (m, a), v in bound.items())
    assert _bindings(before) == bound
    assert list(got) == list(stt.load_file(str(path)))
    for k, t in saved.items():
        assert got[k].dtype == t.dtype and torch.equal(got[k], t)
    assert counts() == {"served": {"safetensors.torch.load_file": 1}, "fallback": {}}


def test_patch_routes_safe_open_numpy_and_load_model(torch, tmp_path):
    import safetensors
    import safetensors.numpy as stn
    import safetensors.torch as stt

    path = tmp_path / "m.safetensors"
    saved = _save(torch, path, bf16=False)
    ref_np = stn.load_file(str(path))
    model = torch.nn.Linear(33, 64)
    stt.save_file(model.state_dict(), str(tmp_path / "lin.safetensors"))
    model2 = torch.nn.Linear(33, 64)
    with memtier.Context() as ctx, patch_safetensors(ctx, views=False):  # the copy mode serves safe_open
        with safetensors.safe_open(str(path), framework="pt", backend="pread") as f:
            assert isinstance(f, safetensors.safe_open)
            assert isinstance(f, memtier.safetensors.safe_open)
            assert f.metadata() == {"k": "v"} and f.keys() == sorted(saved)
            assert torch.equal(f.get_slice("a")[...], saved["a"])
        n_np = ctx.stats().bytes
        arrays = stn.load_file(str(path))
        n_np = ctx.stats().bytes - n_np
        missing, unexpected = stt.load_model(model2, str(tmp_path / "lin.safetensors"))
    assert (missing, unexpected) == (set(), [])
    assert torch.equal(model2.weight, model.weight) and torch.equal(model2.bias, model.bias)
    assert n_np == _payload_bytes(path)
    assert list(arrays) == list(ref_np)
    for k in ref_np:
        assert arrays[k].dtype == ref_np[k].dtype and np.array_equal(arrays[k], ref_np[k])
    assert counts()["served"] == {"safetensors.safe_open": 1, "safetensors.numpy.load_file": 1,
                                  "safetensors.torch.load_model": 1}


def test_plain_call_nesting_and_exceptions(torch, tmp_path):
    import safetensors.torch as stt

    before = _originals()
    p = patch_safetensors()
    assert is_patched()
    with patch_safetensors() as inner:
        with patch_safetensors():
            pass
        assert is_patched() and inner.active
    assert is_patched() and stt.load_file is not before[("safetensors.torch", "load_file")]
    p.stop()
    p.stop()  # idempotent
    assert not is_patched() and _originals() == before

    with pytest.raises(ZeroDivisionError):
        with patch_safetensors():
            with patch_safetensors():
                1 / 0
    assert not is_patched() and _originals() == before

    patch_safetensors()
    with patch_safetensors() as q:
        assert unpatch_safetensors() == 2
        assert not q.active and _originals() == before
    assert not is_patched() and unpatch_safetensors() == 0

    with pytest.raises(TypeError, match="memtier.Context"):
        patch_safetensors(ctx="default")
    assert not is_patched()


def test_names_bound_in_other_modules(torch, tmp_path):
    """A module that imported the functions by name (as transformers does) is
    routed, and gets exactly its objects back; so is one imported during the patch."""
    import safetensors
    import safetensors.torch as stt

    path = tmp_path / "m.safetensors"
    _save(torch, path)
    before = _originals()
    user = types.ModuleType("memtier_test_user_module")
    user.safe_open = safetensors.safe_open
    user.safe_load_file = stt.load_file  # an alias
    user.other = object()
    late = types.ModuleType("memtier_test_late_module")
    sys.modules[user.__name__] = user
    try:
        with memtier.Context() as ctx, patch_safetensors(ctx):
            assert _is_standin(user.safe_open) and _is_standin(user.safe_load_file)
            exec("from safetensors import safe_open\nfrom safetensors.torch import load_file",
                 late.__dict__)
            sys.modules[late.__name__] = late
            assert _is_standin(late.safe_open) and _is_standin(late.load_file)
            user.safe_load_file(str(path))
            assert ctx.stats().bytes == _payload_bytes(path)
        assert user.safe_open is before[("safetensors", "safe_open")]
        assert user.safe_load_file is before[("safetensors.torch", "load_file")]
        assert late.safe_open is before[("safetensors", "safe_open")]
        assert late.load_file is before[("safetensors.torch", "load_file")]
        # safetensors' own modules keep their internal names: a fallback runs the reference as is
        assert stt.safe_open is before[("safetensors", "safe_open")]
    finally:
        sys.modules.pop(user.__name__, None)
        sys.modules.pop(late.__name__, None)


def test_standin_kept_after_stop_calls_the_original(torch, tmp_path):
    import safetensors.torch as stt

    path = tmp_path / "m.safetensors"
    _save(torch, path)
    with patch_safetensors():
        kept = stt.load_file
    with memtier.Context() as ctx, patch_safetensors(ctx):
        pass
    out = kept(str(path))
    assert isinstance(out, dict) and counts()["served"] == {}


def test_fallbacks_keep_the_reference_behaviour(torch, tmp_path):
    import safetensors
    import safetensors.torch as stt

    path = tmp_path / "m.safetensors"
    saved = _save(torch, path)
    cases = [
        lambda: stt.load_file(io.BytesIO(path.read_bytes())),
        lambda: stt.load_file(str(path), device=torch.device("cpu")),
        lambda: stt.load_file(str(path), device="CPU"),
        lambda: stt.load_file(str(path), backend="nope"),
        lambda: stt.load_file(str(path), "cpu", "extra"),
        lambda: safetensors.safe_open(str(path), framework="flax"),
        lambda: safetensors.safe_open(str(path)),
    ]
    expected = []
    for case in cases:
        try:
            case()
            expected.append(None)
        except Exception as e:  # noqa: BLE001 - the reference's own error, whatever it is
            expected.append((type(e), str(e)))
    with memtier.Context() as ctx, patch_safetensors(ctx):
        for case, exp in zip(cases, expected):
            try:
                case()
                got = None
            except Exception as e:  # noqa: BLE001
                got = (type(e), str(e))
            assert got == exp
        assert ctx.stats().bytes == 0  # all went to the original
        # served by the original, not refused: a bf16 model from an f32 file (the reference casts)
        m32 = torch.nn.Linear(4, 3)
        stt.save_file(m32.state_dict(), str(tmp_path / "f32.safetensors"))
        m16 = torch.nn.Linear(4, 3).to(torch.bfloat16)
        assert stt.load_model(m16, str(tmp_path / "f32.safetensors")) == (set(), [])
        assert torch.equal(m16.weight, m32.weight.to(torch.bfloat16))
        # the reference's load_model read the file with the (patched) load_file
        assert ctx.stats().bytes == _payload_bytes(tmp_path / "f32.safetensors")
    fb = counts()["fallback"]
    assert sum(fb.values()) == len(cases) + 1
    assert any(k.startswith("safetensors.torch.load_file: filename is a BytesIO") for k in fb)
    assert any(k.startswith("safetensors.torch.load_model: MemTier refused the model") for k in fb)
    assert counts()["served"] == {"safetensors.torch.load_file": 1}
    assert torch.equal(stt.load_file(str(path))["a"], saved["a"])


def test_load_model_falls_back_for_load_hooks(torch, tmp_path):
    import safetensors.torch as stt

    m = torch.nn.Linear(4, 3)
    stt.save_file(m.state_dict(), str(tmp_path / "m.safetensors"))
    m2 = torch.nn.Linear(4, 3)
    seen = []
    m2.register_load_state_dict_pre_hook(lambda *a, **k: seen.append(1))
    with patch_safetensors():
        stt.load_model(m2, str(tmp_path / "m.safetensors"))
    assert seen == [1] and torch.equal(m2.weight, m.weight)
    assert any("load_state_dict hooks" in k for k in counts()["fallback"])


def test_patch_before_safetensors_is_imported(run_py):
    """The import hook patches safetensors modules imported while the patch is
    on, and the patch leaves no trace (the hook too) when it ends."""
    r = run_py("""
        import sys
        from memtier.integrations import patch_safetensors
        assert "safetensors" not in sys.modules
        p = patch_safetensors()
        from safetensors import safe_open
        import safetensors.numpy
        assert safe_open.__memtier_original__ is not None
        assert safetensors.numpy.load_file.__memtier_original__ is not None
        hooks = len(sys.meta_path)
        p.stop()
        import safetensors
        assert not hasattr(safetensors.safe_open, "__memtier_original__")
        assert not hasattr(safetensors.numpy.load_file, "__memtier_original__")
        assert len(sys.meta_path) == hooks - 1
        print("ok")
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_env_switch(run_py):
    code = """
        import sys, warnings
        warnings.simplefilter("error")
        try:
            import memtier.integrations as mi  # import memtier applies the switch first
            p = mi.apply_env()
        except RuntimeWarning as e:
            print("warning", e)
            raise SystemExit(0)
        print(p is not None, mi.is_patched(), "torch" in sys.modules, "safetensors" in sys.modules)
        if p is not None:
            import safetensors.numpy
            assert safetensors.numpy.load_file.__memtier_original__ is not None
            assert mi.apply_env() is p
    """
    on = run_py(code, env={"MEMTIER_PATCH_SAFETENSORS": "1"})
    assert on.returncode == 0, on.stderr
    assert on.stdout.strip() == "True True False False"
    off = run_py(code, env={"MEMTIER_PATCH_SAFETENSORS": "0"})
    assert off.stdout.strip() == "False False False False", off.stderr
    bad = run_py(code, env={"MEMTIER_PATCH_SAFETENSORS": "maybe"})
    assert bad.returncode == 0, bad.stderr
    assert bad.stdout.startswith("warning MEMTIER_PATCH_SAFETENSORS='maybe' is not understood")


# ---- transformers ---------------------------------------------------------------------------


def _tiny_llama(transformers, torch, seed):
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64,
                                   tie_word_embeddings=False)
    return transformers.LlamaForCausalLM(cfg).eval()


def _tiny_gpt2(transformers, torch, seed):
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(vocab_size=96, n_positions=32, n_embd=32, n_layer=2, n_head=4)
    return transformers.GPT2LMHeadModel(cfg).eval()  # tied lm_head / wte


@pytest.mark.parametrize("arch,shard,views", [("llama", "20KB", False), ("llama", None, False),
                                              ("gpt2", "30KB", False), ("llama", "20KB", None),
                                              ("gpt2", "30KB", None)])
def test_transformers_from_pretrained_under_the_patch(torch, tmp_path, arch, shard, views):
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    make = _tiny_llama if arch == "llama" else _tiny_gpt2
    model = make(transformers, torch, seed=1)
    kw = {} if shard is None else {"max_shard_size": shard}
    model.save_pretrained(str(tmp_path), safe_serialization=True, **kw)
    files = sorted(f for f in os.listdir(tmp_path) if f.endswith(".safetensors"))
    if shard is None:
        assert files == ["model.safetensors"]
    else:
        assert len(files) > 1 and (tmp_path / "model.safetensors.index.json").exists()
    import transformers.modeling_utils as mu

    before = _originals()
    bound = _bindings(before)
    assert ("transformers.modeling_utils", "safe_open") in bound
    with memtier.Context() as ctx, patch_safetensors(ctx, views=views):
        assert _is_standin(mu.safe_open)
        loaded = type(model).from_pretrained(str(tmp_path)).eval()
        served = ctx.stats().bytes
    payload = sum(_payload_bytes(tmp_path / f) for f in files)
    if views is False:
        # every tensor of every file, each read once, and nothing else (the headers
        # are parsed from the library's own read, outside the stats)
        assert served == payload and view_bytes() == {}
        assert counts()["served"] == {"safetensors.safe_open": len(files)}
    else:  # the default: safe_open on the CPU gives the reference's views, their bytes counted
        assert served == 0 and view_bytes() == {"safetensors.safe_open": payload}
        assert counts()["served"] == {"safetensors.safe_open (views)": len(files)}
    assert counts()["fallback"] == {}
    assert _originals() == before and _bindings(before) == bound
    assert mu.safe_open is before[("safetensors", "safe_open")]
    want = dict(model.named_parameters()) | dict(model.named_buffers())
    got = dict(loaded.named_parameters()) | dict(loaded.named_buffers())
    assert sorted(got) == sorted(want)
    for k, t in want.items():
        assert got[k].dtype == t.dtype and got[k].shape == t.shape and torch.equal(got[k], t), k
    for k, t in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], t), k
    if arch == "gpt2":  # the tie survives
        assert loaded.lm_head.weight.data_ptr() == loaded.transformer.wte.weight.data_ptr()


# ---- torch Distributed Checkpoint ------------------------------------------------------------


def _net(torch, seed):
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                            torch.nn.Linear(32, 4, bias=False))
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    for _ in range(2):
        m(torch.randn(8, 16)).square().sum().backward()
        opt.step()
        opt.zero_grad()
    return m, opt


def test_dcp_round_trip_through_memtier(torch, tmp_path):
    import warnings

    dcp = pytest.importorskip("torch.distributed.checkpoint")
    from memtier.integrations.dcp import MemTierFileSystemReader

    m, opt = _net(torch, seed=3)
    state = {"model": m.state_dict(), "optim": opt.state_dict(), "epoch": 7, "tag": "run-a"}
    ckpt = tmp_path / "ckpt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "assuming ... a single process"
        dcp.save(state, storage_writer=dcp.FileSystemWriter(str(ckpt)))
        m2, opt2 = _net(torch, seed=4)
        dest = {"model": m2.state_dict(), "optim": opt2.state_dict(), "epoch": 0, "tag": ""}
        with memtier.Context() as ctx:
            reader = MemTierFileSystemReader(ckpt, ctx=ctx, staging_bytes=4096)
            dcp.load(dest, storage_reader=reader)
            served = ctx.stats().bytes
    # the .metadata file once and every item's range once: every byte of the checkpoint
    assert served == sum(os.path.getsize(ckpt / f) for f in os.listdir(ckpt))
    assert dest["epoch"] == 7 and dest["tag"] == "run-a"
    for k, t in m.state_dict().items():
        assert torch.equal(dest["model"][k], t), k
    m2.load_state_dict(dest["model"])
    opt2.load_state_dict(dest["optim"])
    want, got = opt.state_dict(), opt2.state_dict()
    assert got["param_groups"] == want["param_groups"]
    assert sorted(got["state"]) == sorted(want["state"])
    for i, s in want["state"].items():
        for k, v in s.items():
            assert torch.equal(got["state"][i][k], v), (i, k)


def test_dcp_reader_bad_arguments(torch, tmp_path):
    from memtier.integrations.dcp import MemTierFileSystemReader

    with pytest.raises(ValueError, match="staging_bytes must be a positive int"):
        MemTierFileSystemReader(tmp_path, staging_bytes=0)
    with pytest.raises(TypeError, match="memtier.Context"):
        MemTierFileSystemReader(tmp_path, ctx=object())
    with pytest.raises(FileNotFoundError):
        MemTierFileSystemReader(tmp_path / "absent").read_metadata()
