"""Implementations by name. A name is one of

- ``old``, ``new``, ``main`` (kernels_new with vLLM main's optional parameters), ``oracle``;
- a dotted module path on sys.path exposing the two SPEC §1 functions (for example
  vLLM's ``vllm.v1.attention.backends.mla.sparse_utils``, where vLLM is installed);
- a path to a ``.py`` file, loaded as a module of its own (sources.py);
- ``REV:PATH``: the file at a git revision of the repository ``repo`` (``--repo``,
  env ``REMAP_AB_REPO``, default the current directory), read with ``git show``
  without checking anything out (sources.py).

The last two need no vLLM: their ``vllm.triton_utils`` import is served by
vllm_shim.py. ``resolve`` turns a name into its canonical form without importing
anything (a file's absolute path; ``REV@SHA12:PATH`` for a revision, pinned to the
commit it resolved to), which is what every later step (workers, run.json, reports,
replay) uses, so all of them load the same bytes.
"""

from __future__ import annotations

import functools
import importlib
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Optional

from remap_ab import runtime, sources
from remap_ab.errors import ImplementationError, ImplementationOutputError, UnloadableFileError, exception_line
from remap_ab.sources import Source
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.judge import features
from remap_ab.subjects.remap.judge.compare import OrderContract
from remap_ab.subjects.remap.judge.out_layout import caller_buffers

BUILTIN = {
    "old": "kernels_old",
    "new": "kernels_new",
    "main": "kernels_main",
    "oracle": "remap_ab.subjects.remap.judge.oracle",
}
API = ("triton_convert_req_index_to_global_index", "triton_filter_and_convert_dcp_index")


@dataclass(frozen=True)
class Implementation:
    name: str
    module_path: str
    module: ModuleType
    source: Optional[Source] = None  # what was loaded, for a file or a revision's file

    def tiling(self, config: CaseConfig) -> tuple[bool, int, int, int]:
        """``(single_tile, block_n, tiles_per_row, num_warps)`` this implementation
        launches for ``config`` (SPEC §6): its ``_remap_tiling`` when it has one, else
        the old kernel's shape (a foreign module is assumed to launch the same)."""
        tiling = getattr(self.module, "_remap_tiling", None)
        if tiling is not None:
            return tiling(config.topk, config.block_n, config.counts_computed)
        return False, config.block_n, config.tiles_per_row, getattr(self.module, "_DEFAULT_NUM_WARPS", 4)

    @functools.cached_property
    def _contracts(self) -> dict:  # (K, BLOCK_N, counts computed) -> OrderContract: asked on every call
        return {}

    def order_contract(self, config: CaseConfig) -> OrderContract:
        """What this implementation promises about a compacted row's order."""
        key = (config.topk, config.block_n, config.counts_computed)
        contract = self._contracts.get(key)
        if contract is None:
            contract = self._contracts[key] = self._order_contract(config)
        return contract

    def _order_contract(self, config: CaseConfig) -> OrderContract:
        if self.module_path == BUILTIN["oracle"]:
            return OrderContract(True, config.topk, "reference: column order")
        single, block_n, tiles, _ = self.tiling(config)
        if single or tiles == 1:
            why = f"single tile (K={config.topk})" if single else f"one tile (K == BLOCK_N == {block_n})"
            return OrderContract(True, config.topk, why)
        return OrderContract(False, block_n, f"{tiles} tiles of {block_n}, atomic slot order")

    def __call__(self, config: CaseConfig, inputs, buffers=None):
        """Run the case through this implementation's public API (SPEC §1), with the
        optional parameters the case turns on (features.py: ``BLOCK_STRIDE_ROWS`` when
        ``block_stride`` is set; ``buffers``, call.py's caller-owned outputs, as
        ``out=`` / ``valid_counts_out=``), each under the keyword this module's wrapper
        takes it by. A parameter the case leaves off is not passed.

        Returns ``(out, counts)``; ``counts`` is None when the case does not ask for it.
        """
        m = self.module
        if buffers is None and config.out_buffers:
            buffers = caller_buffers(config, inputs.device)
        extra = features.call_arguments(config, buffers, m)
        if config.mode == "convert":
            result = m.triton_convert_req_index_to_global_index(
                inputs.req_id,
                inputs.block_table,
                inputs.token_indices,
                BLOCK_SIZE=config.block_size,
                NUM_TOPK_TOKENS=config.topk,
                BLOCK_N=config.block_n,
                HAS_PREFILL_WORKSPACE=config.has_prefill,
                prefill_workspace_request_ids=inputs.prefill_request_ids,
                prefill_workspace_starts=inputs.prefill_starts,
                return_valid_counts=config.counts,
                **extra,
            )
        else:
            result = m.triton_filter_and_convert_dcp_index(
                inputs.req_id,
                inputs.block_table,
                inputs.token_indices,
                config.dcp_size,
                config.dcp_rank,
                cp_kv_cache_interleave_size=config.interleave,
                BLOCK_SIZE=config.block_size,
                NUM_TOPK_TOKENS=config.topk,
                BLOCK_N=config.block_n,
                return_valid_counts=config.counts,
                compact_valid_to_front=config.compact,
                **extra,
            )
        return checked_result(self.name, config, result, inputs.device)


@functools.cache
def feature_plan(a: str, b: str) -> features.Plan:
    """features.py's plan for two implementations by name (once per process)."""
    return features.plan_modules(get(a).module, get(b).module, a, b)


def _describe(value) -> str:
    """What came back, in a few words: type, and dtype/shape/device for a tensor."""
    import torch

    if value is None:
        return "None"
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)} on {value.device}"
    if isinstance(value, (tuple, list)):
        return f"a {len(value)}-element {type(value).__name__} ({', '.join(type(v).__name__ for v in value[:4])})"
    return f"an object of type {type(value).__name__}"


def checked_result(name: str, config: CaseConfig, result, device) -> tuple:
    """``(out, counts)`` from what an implementation returned, or ImplementationOutputError
    saying what came back: a tensor when counts are not asked for, a (tensor, tensor)
    tuple when they are (SPEC §6), both on the inputs' device."""
    import torch

    if config.counts:
        if not (isinstance(result, tuple) and len(result) == 2):
            raise ImplementationOutputError(
                f"{name} returned {_describe(result)}; with return_valid_counts it must return (out, valid_counts)"
            )
        out, counts = result
        parts: tuple[tuple[str, object], ...] = (("out", out), ("valid_counts", counts))
    else:
        out, counts = result, None
        parts = (("out", out),)
    for what, value in parts:
        if not isinstance(value, torch.Tensor):
            expected = "a tensor" if not config.counts else "(tensor, tensor)"
            raise ImplementationOutputError(f"{name} returned {_describe(value)} as {what}; it must return {expected}")
        if value.device != torch.device(device):
            raise ImplementationOutputError(
                f"{name} returned {what} on {value.device}, the inputs live on {device}"
            )
    return out, counts


_cache: dict[str, Implementation] = {}


def resolve(name: str, repo: Optional[str] = None) -> str:
    """The canonical name of ``name`` (see the module docstring), without importing
    it: ImplementationError (one line, exit 2) for a file or revision that does not
    exist."""
    if not isinstance(name, str):
        raise ImplementationError(f"implementation name {name!r} is not a string")
    spec = None if name in BUILTIN else sources.parse(name, repo)
    return name if spec is None else spec.canonical


def get(name: str, repo: Optional[str] = None) -> Implementation:
    """Import (once) the implementation called ``name``. Whatever goes wrong while
    importing it (an empty, relative or malformed name, ImportError, an exception or
    SyntaxError inside the module, a file or revision that does not exist, a file
    importing a vLLM module the shim does not serve) is an ImplementationError: one
    line, exit 2."""
    key = _key(name, repo)
    if key in _cache:
        return _cache[key]
    path = BUILTIN.get(name, name) if isinstance(name, str) else name
    if path != BUILTIN["oracle"]:
        runtime.select(runtime.chosen())  # fixes TRITON_INTERPRET before any @triton.jit import
    spec = sources.parse(name, repo) if isinstance(name, str) and name not in BUILTIN else None
    if spec is not None:
        module, source = sources.load(spec)
        path = module.__name__
        label = spec.canonical
    else:
        module, source, label = _import_dotted(name, path), None, name
    missing = [fn for fn in API if not callable(getattr(module, fn, None))]
    if missing:
        what = f"{label}" if source is not None else f"module {path}"
        raise (UnloadableFileError if source is not None else ImplementationError)(
            f"{what} lacks {', '.join(missing)}; an implementation must expose both SPEC §1 functions"
        )
    impl = Implementation(name=label, module_path=path, module=module, source=source)
    _cache[key] = impl
    if source is not None:
        _cache[_key(label, repo)] = impl
    return impl


def _key(name, repo: Optional[str]) -> str:
    """The cache key: the name, and for a revision also the repository it is read from."""
    if isinstance(name, str) and sources.looks_like_revision(name):
        return f"{name}\0{sources.repo_dir(repo)}"
    return name


def _import_dotted(name, path) -> ModuleType:
    if not isinstance(name, str) or not all(part.isidentifier() for part in path.split(".")):
        raise ImplementationError(
            f"implementation name {name!r} is not old, new, oracle or a dotted module path (like pkg.module), "
            f"nor a .py file or REV:PATH in a git repository"
        )
    try:
        return importlib.import_module(path)
    except ImportError as exc:
        raise ImplementationError(
            f"cannot import implementation {name!r} ({exception_line(exc)}); use old, new, oracle or a dotted "
            f"module path on sys.path"
        ) from None
    except (Exception, SystemExit) as exc:  # any failure while importing the user's module is the user's
        where = ""
        if isinstance(exc, SyntaxError) and exc.filename:
            where = f" at {exc.filename}:{exc.lineno}"
        raise ImplementationError(
            f"implementation {name!r} failed while importing{where}: {exception_line(exc)}; fix the module"
        ) from None


def adopt_repo(recorded: Optional[dict]) -> None:
    """Read revisions from the repository a run recorded (run.json "implementations"),
    here and in worker processes: resuming a run loads the commits it started with."""
    for loaded in (recorded or {}).values():
        if loaded and loaded.get("kind") == "git" and loaded.get("repo"):
            os.environ[sources.REPO_VARIABLE] = loaded["repo"]


def forget(name: str) -> None:
    """Drop ``name`` from the cache, so the next ``get`` imports it afresh (tests that
    write a module, use it and delete it)."""
    for key in [k for k, impl in _cache.items() if name in (k.split("\0")[0], impl.name)]:
        del _cache[key]
