"""Implementations by name: ``old``, ``new``, ``oracle``, or any importable module
that exposes the two SPEC §1 functions, named by its dotted path (for example vLLM's
``vllm.v1.attention.backends.mla.sparse_utils``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from remap_ab import backend
from remap_ab.compare import OrderContract
from remap_ab.config import CaseConfig
from remap_ab.errors import ImplementationError

BUILTIN = {
    "old": "kernels_old",
    "new": "kernels_new",
    "oracle": "remap_ab.oracle",
}
API = ("triton_convert_req_index_to_global_index", "triton_filter_and_convert_dcp_index")


@dataclass(frozen=True)
class Implementation:
    name: str
    module_path: str
    module: ModuleType

    def tiling(self, config: CaseConfig) -> tuple[bool, int, int, int]:
        """``(single_tile, block_n, tiles_per_row, num_warps)`` this implementation
        launches for ``config`` (SPEC §6): its ``_remap_tiling`` when it has one, else
        the old kernel's shape (a foreign module is assumed to launch the same)."""
        tiling = getattr(self.module, "_remap_tiling", None)
        if tiling is not None:
            return tiling(config.topk, config.block_n, config.counts_computed)
        return False, config.block_n, config.tiles_per_row, getattr(self.module, "_DEFAULT_NUM_WARPS", 4)

    def order_contract(self, config: CaseConfig) -> OrderContract:
        """What this implementation promises about a compacted row's order."""
        if self.module_path == BUILTIN["oracle"]:
            return OrderContract(True, config.topk, "reference: column order")
        single, block_n, tiles, _ = self.tiling(config)
        if single or tiles == 1:
            why = f"single tile (K={config.topk})" if single else f"one tile (K == BLOCK_N == {block_n})"
            return OrderContract(True, config.topk, why)
        return OrderContract(False, block_n, f"{tiles} tiles of {block_n}, atomic slot order")

    def __call__(self, config: CaseConfig, inputs):
        """Run the case through this implementation's public API (SPEC §1).

        Returns ``(out, counts)``; ``counts`` is None when the case does not ask for it.
        """
        m = self.module
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
            )
        if config.counts:
            out, counts = result
            return out, counts
        return result, None


_cache: dict[str, Implementation] = {}


def get(name: str) -> Implementation:
    """Import (once) the implementation called ``name``."""
    if name in _cache:
        return _cache[name]
    path = BUILTIN.get(name, name)
    if path != BUILTIN["oracle"]:
        backend.select(backend.chosen())  # fixes TRITON_INTERPRET before any @triton.jit import
    try:
        module = importlib.import_module(path)
    except ImportError as exc:
        raise ImplementationError(
            f"cannot import implementation {name!r} ({exc}); use old, new, oracle or a dotted module path on sys.path"
        ) from None
    missing = [fn for fn in API if not callable(getattr(module, fn, None))]
    if missing:
        raise ImplementationError(f"module {path} lacks {', '.join(missing)}; an implementation must expose both SPEC §1 functions")
    impl = Implementation(name=name, module_path=path, module=module)
    _cache[name] = impl
    return impl
