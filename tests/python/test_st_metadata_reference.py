"""``safe_open(...).metadata()`` against the installed reference safetensors
(field case N01, tests/field_cases.md): the same value for a header without
``__metadata__``, with ``"__metadata__": null``, with ``{}`` and with entries,
alone and next to a tensor. The expected values are the reference's own
answers, asserted exactly as well, so a reference that changed its rule
fails here rather than being followed silently."""

from __future__ import annotations

import json
import struct
from typing import Any, Dict, Optional

import pytest

from memtier.safetensors import safe_open

reference = pytest.importorskip("safetensors")

_TENSOR = {"t": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}

CASES = [
    # (id, header without the tensor, expected metadata())
    ("absent", {}, None),
    ("null", {"__metadata__": None}, None),
    ("empty", {"__metadata__": {}}, {}),
    ("entries", {"__metadata__": {"format": "pt", "a": "\u00e9"}}, {"format": "pt", "a": "\u00e9"}),
]


def _write(path: str, header: Dict[str, Any], with_tensor: bool) -> None:
    h = dict(header, **_TENSOR) if with_tensor else dict(header)
    text = json.dumps(h, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + (b"\x01\x02" if with_tensor else b""))


@pytest.mark.parametrize("with_tensor", [False, True], ids=["alone", "with_tensor"])
@pytest.mark.parametrize("name,header,want", CASES, ids=[c[0] for c in CASES])
def test_metadata_matches_reference(tmp_path, name: str, header: Dict[str, Any],
                                    want: Optional[Dict[str, str]], with_tensor: bool) -> None:
    path = str(tmp_path / f"{name}.safetensors")
    _write(path, header, with_tensor)
    with reference.safe_open(path, "np") as rf:
        ref = rf.metadata()
    with safe_open(path, "np") as f:
        got = f.metadata()
        again = f.metadata()
    assert ref == want and type(ref) is type(want)
    assert got == want and type(got) is type(want)
    assert again == want
    if got is not None:
        got["added"] = "x"  # a copy: the handle's answer does not change
        with safe_open(path, "np") as f:
            assert f.metadata() == want
