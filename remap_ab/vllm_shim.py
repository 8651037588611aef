"""What a kernel file loaded from a path or a git revision (sources.py) gets for its
vLLM import, without vLLM installed: ``from vllm.triton_utils import tl, triton`` hands
out ``triton`` and ``triton.language``; any other ``vllm`` import raises
``ForeignVllmImport`` naming it.

Nothing is put into ``sys.modules``: the file's module gets its own ``__builtins__``
whose ``__import__`` answers ``vllm`` imports and passes every other import through, so
a real vLLM installed beside remap-ab is never shadowed.
"""

from __future__ import annotations

import builtins
import types
from typing import Optional

SERVED = "vllm.triton_utils"


class ForeignVllmImport(ImportError):
    """The file imports a vLLM module this shim does not serve (only vllm.triton_utils)."""

    def __init__(self, module: str, hint: str):
        self.module = module
        super().__init__(
            f"imports {module}, which needs vLLM itself (without it only {SERVED} is served); "
            f"install vLLM and use the dotted module path{hint}"
        )


def triton_utils() -> types.ModuleType:
    """The stand-in for ``vllm.triton_utils``: ``triton``, ``tl`` and ``HAS_TRITON``."""
    import triton
    import triton.language as tl

    module = types.ModuleType(SERVED, "remap-ab's stand-in for vllm.triton_utils (remap_ab/vllm_shim.py)")
    module.triton, module.tl, module.HAS_TRITON = triton, tl, True  # type: ignore[attr-defined]
    return module


def builtins_for(dotted_hint: Optional[str]) -> dict:
    """A ``__builtins__`` for the file's module: the real builtins with ``__import__``
    answering vllm imports. ``dotted_hint``: the module's dotted path, if known, for
    the error message."""
    real_import = builtins.__import__
    hint = f" (--a/--b {dotted_hint})" if dotted_hint else ""
    served = triton_utils()
    package = types.ModuleType("vllm", "remap-ab's stand-in for the vllm package: only triton_utils")
    package.triton_utils = served  # type: ignore[attr-defined]

    def vllm_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level or not (name == "vllm" or name.startswith("vllm.")):
            return real_import(name, globals, locals, fromlist, level)
        wanted = list(fromlist or ())
        if name == SERVED:
            return served if wanted else package
        if name == "vllm" and wanted and all(w == "triton_utils" for w in wanted):
            return package
        asked = f"vllm.{wanted[0]}" if name == "vllm" and wanted else name
        raise ForeignVllmImport(asked, hint)

    table = dict(vars(builtins))
    table["__import__"] = vllm_import
    return table
