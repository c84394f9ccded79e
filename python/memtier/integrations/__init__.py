"""MemTier inside other libraries, with no change to their code or the user's.

* :func:`patch_safetensors` (a context manager, or a plain call that stays on
  until ``.stop()`` / :func:`unpatch_safetensors`) routes
  ``safetensors.safe_open``, ``safetensors.torch.load_file``,
  ``safetensors.torch.load_model`` and ``safetensors.numpy.load_file`` (and the
  names other modules bound to them, e.g. ``transformers.modeling_utils.safe_open``)
  through :mod:`memtier.safetensors`; calls MemTier cannot serve with the
  reference's meaning go to the original (:func:`counts` says which, and why).
  By default ``safe_open`` of a local file on the CPU returns safetensors' own
  mmap views, as without the patch (the reference's semantics; MemTier counts
  their bytes, :func:`view_bytes`); ``views=True`` does the same for
  ``load_file``, ``views=False`` gives tensors that own their memory everywhere.
  ``MEMTIER_PATCH_SAFETENSORS=1`` turns it on at ``import memtier``
  (:func:`apply_env`).
* :class:`memtier.integrations.dcp.MemTierFileSystemReader`: a torch
  Distributed Checkpoint ``StorageReader`` whose reads go through MemTier.

::

    import memtier.integrations as mi
    with mi.patch_safetensors():
        model = transformers.AutoModelForCausalLM.from_pretrained("checkpoint_dir")

Importing this package imports neither torch nor safetensors.
"""

from ._patch import (ENV_PATCH, SafetensorsPatch, apply_env, is_patched, patch_safetensors,
                     unpatch_safetensors)
from ._routes import counts, reset_counts
from ._views import view_bytes

__all__ = ["patch_safetensors", "unpatch_safetensors", "is_patched", "SafetensorsPatch",
           "counts", "reset_counts", "view_bytes", "apply_env", "ENV_PATCH", "MemTierFileSystemReader"]


def __getattr__(name: str):  # PEP 562: the DCP reader imports torch, so only on first access
    if name == "MemTierFileSystemReader":
        from .dcp import MemTierFileSystemReader

        return MemTierFileSystemReader
    if name == "dcp":
        import importlib

        return importlib.import_module(f"{__name__}.dcp")
    raise AttributeError(f"module 'memtier.integrations' has no attribute {name!r}")
