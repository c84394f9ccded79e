"""The dataset index corpus: the Python parser agrees with expected.json.

tests/data/index_corpus/ holds small valid and broken index files (text and
npy) and expected.json, which gives for each file the records, or the error
kind, the line/row it must name and the exact message. The Go parser
(runtime/objects, ``go test ./runtime/objects/``) is held to the same file, so
the two parsers agree. Also checked: the corpus on disk is what
make_corpus.py generates, and MemTierDataset reports the same errors.
"""

from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest

import memtier
from memtier import _index

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(REPO, "tests", "data", "index_corpus")

with open(os.path.join(CORPUS, "expected.json")) as _f:
    EXPECTED = json.load(_f)["files"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file(name):
    case = EXPECTED[name]
    path = os.path.join(CORPUS, name)
    with open(path, "rb") as f:
        content = f.read()
    if case["valid"]:
        arr = _index.parse_index(path, case["data_size"])
        assert arr.dtype == np.int64 and arr.ndim == 2 and arr.shape[1] == 2 and arr.flags.c_contiguous
        assert arr.tolist() == case["records"]
        assert _index.parse_index_bytes(content, case["data_size"]).tolist() == case["records"]
        return
    with pytest.raises(memtier.FormatError) as ei:
        _index.parse_index(path, case["data_size"])
    e = ei.value
    assert isinstance(e, ValueError) and isinstance(e, memtier.MemTierError)
    assert e.code == -11 and e.name == "FORMAT"
    assert (e.kind, e.line, e.row) == (case["kind"], case.get("line"), case.get("row"))
    assert e.message == case["message"]
    assert str(e) == "index %s: %s" % (path, case["message"])
    if case.get("line") is not None:
        assert e.message.startswith("line %d: " % case["line"])
    if case.get("row") is not None:
        assert "row %d" % case["row"] in e.message
    with pytest.raises(memtier.FormatError) as ei2:
        _index.parse_index_bytes(content, case["data_size"])
    assert str(ei2.value) == "index: " + case["message"]


def test_corpus_is_what_make_corpus_generates():
    spec = importlib.util.spec_from_file_location("make_corpus", os.path.join(CORPUS, "make_corpus.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # builds mod.files / mod.expected; writes nothing
    on_disk = {n for n in os.listdir(CORPUS) if n.endswith((".txt", ".npy"))}
    assert on_disk == set(mod.files) == set(EXPECTED)
    for name, content in mod.files.items():
        with open(os.path.join(CORPUS, name), "rb") as f:
            assert f.read() == content, "%s is stale: rerun make_corpus.py" % name
    assert json.loads(json.dumps(mod.expected)) == EXPECTED


def test_corpus_covers_every_kind():
    kinds = {c["kind"] for c in EXPECTED.values() if not c["valid"]}
    assert kinds == {"negative", "overflow", "range_overflow", "past_end", "fields", "not_decimal", "dtype",
                     "shape", "fortran_order", "truncated", "trailing_data", "header", "header_too_large"}
    assert any(n.endswith(".txt") for n in EXPECTED) and any(n.endswith(".npy") for n in EXPECTED)


@pytest.mark.parametrize("name", sorted(n for n, c in EXPECTED.items() if c["data_size"] == 1000))
def test_dataset_reports_the_same(name, tmp_path):
    """MemTierDataset(index, data) with a 1000-byte data file: same records or error."""
    from memtier.dataset import MemTierDataset

    case = EXPECTED[name]
    data = tmp_path / "data.bin"
    data.write_bytes(bytes(1000))
    path = os.path.join(CORPUS, name)
    if case["valid"]:
        ds = MemTierDataset(path, str(data))
        assert ds.ranges.tolist() == case["records"] and len(ds) == len(case["records"])
    else:
        with pytest.raises(memtier.FormatError) as ei:
            MemTierDataset(path, str(data))
        assert ei.value.message == case["message"]


def test_large_text_and_npy_agree():
    rng = np.random.default_rng(7)
    recs = np.stack([rng.integers(0, 1 << 40, 50_000), rng.integers(0, 1 << 20, 50_000)], 1)
    text = "".join("%d %d\n" % (o, n) for o, n in recs.tolist()).encode()
    import io

    b = io.BytesIO()
    np.save(b, recs.astype("<u8"))
    a1 = _index.parse_index_bytes(text, 1 << 41)
    a2 = _index.parse_index_bytes(b.getvalue(), 1 << 41)
    assert np.array_equal(a1, recs) and np.array_equal(a2, recs)
    recs[40_000, 1] = 1 << 41
    b = io.BytesIO()
    np.save(b, recs.astype("<u8"))
    with pytest.raises(memtier.FormatError) as ei:
        _index.parse_index_bytes(b.getvalue(), 1 << 41)
    assert ei.value.row == 40_000 and ei.value.kind == "past_end"
