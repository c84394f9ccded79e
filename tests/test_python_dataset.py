"""MemTierDataset smoke test: runs directly (prints OK, exit 0) and under pytest.

    python tests/test_python_dataset.py

Builds a small data file and both index encodings (npy and text), then checks
every sample through ``ds[i]``, one batched ``__getitems__``, a pickle round
trip and, when torch is used, a DataLoader epoch (shuffle, batch_size=32).
The full suite is tests/python/test_dataset.py and test_index_corpus.py.
"""

from __future__ import annotations

import os
import pickle
import sys
import tempfile

import numpy as np

try:
    import memtier
except ImportError:  # a checkout without `pip install -e .`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import memtier


def _files(tmp: str, n: int = 500):
    """Sample k: 4 bytes k little-endian, then (k*131 + j*7) % 251; lengths 4..300."""
    rng = np.random.default_rng(11)
    lengths = rng.integers(4, 301, n)
    samples = []
    for k in range(n):
        b = ((np.arange(int(lengths[k])) * 7 + k * 131) % 251).astype(np.uint8)
        b[:4] = np.frombuffer(k.to_bytes(4, "little"), np.uint8)
        samples.append(b)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    data = os.path.join(tmp, "data.bin")
    np.concatenate(samples).tofile(data)
    ranges = np.stack([offsets, lengths], 1)
    npy = os.path.join(tmp, "index.npy")
    np.save(npy, ranges.astype("<i8"))
    txt = os.path.join(tmp, "index.txt")
    with open(txt, "w") as f:
        f.write("# offset length\n" + "".join("%d %d\n" % (o, n) for o, n in ranges.tolist()))
    return npy, txt, data, samples


def _np(x):
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def _collate(batch):
    return batch


def test_dataset_smoke():
    with tempfile.TemporaryDirectory() as tmp:
        npy, txt, data, samples = _files(tmp)
        for index in (npy, txt):
            ds = memtier.MemTierDataset(index, data)
            assert len(ds) == len(samples)
            for k in range(len(ds)):
                assert np.array_equal(_np(ds[k]), samples[k]), k
            assert np.array_equal(_np(ds[-1]), samples[-1])
            batch = ds.__getitems__(list(range(0, len(ds), 3)))
            for s, k in zip(batch, range(0, len(ds), 3)):
                assert np.array_equal(_np(s), samples[k]), k
            ds2 = pickle.loads(pickle.dumps(ds))
            assert np.array_equal(_np(ds2[7]), samples[7])
        try:
            ds[len(ds)]
        except IndexError:
            pass
        else:
            raise AssertionError("no IndexError past the end")
        from memtier import _dtypes

        if _dtypes.torch_module() is not None:
            from torch.utils.data import DataLoader

            seen = []
            for batch in DataLoader(ds, batch_size=32, shuffle=True, collate_fn=_collate):
                for s in batch:
                    k = int.from_bytes(s[:4].numpy().tobytes(), "little")
                    assert np.array_equal(s.numpy(), samples[k])
                    seen.append(k)
            assert sorted(seen) == list(range(len(samples)))


if __name__ == "__main__":
    test_dataset_smoke()
    print("OK")
