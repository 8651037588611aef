"""What the compiler made of each kernel variant: registers per thread, spills, shared
memory, warps, and the occupancy those allow on an H200 (issue 12 §2, issue 14 §2).

A Triton launch returns the ``CompiledKernel`` it ran; after its first launch it knows
``n_regs`` and ``n_spills`` (from loading the binary) and its metadata holds ``shared``
(bytes) and ``num_warps``. ``recording()`` wraps a kernel's launch entry for the
duration of a block (eager calls only: the wrapper adds a Python frame, so it is never
active while host time is measured) and records every compiled variant with the
constexprs it was launched with. ``jit_cache_variants`` lists whatever else the JIT's
cache holds, in case a wrapper launches through another path.

Occupancy is the CUDA occupancy calculator's arithmetic for one SM (see ``SM90``):
blocks per SM limited by threads, by registers (allocated per warp in units of 256),
by shared memory (plus the 1 KB the driver reserves per block), and by the block limit.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class SMLimits:
    regs: int = 65536
    threads: int = 2048
    blocks: int = 32
    smem_bytes: int = 228 * 1024
    smem_reserved_per_block: int = 1024
    reg_alloc_unit: int = 256  # registers per warp are allocated in these units
    warp_size: int = 32
    max_regs_per_thread: int = 255


SM90 = SMLimits()  # H100 / H200
# The CUDA occupancy calculator's per-compute-capability limits.
SM80 = SMLimits(smem_bytes=164 * 1024)  # A100
SM100 = SMLimits()  # B200 / GB200: as SM90
SM120 = SMLimits(threads=1536, smem_bytes=100 * 1024)  # RTX 50xx: 48 warps per SM


@dataclass(frozen=True)
class CULimits:
    """One AMD compute unit: 4 SIMDs, each with at most ``waves_per_simd`` waves (the
    register limit is in the compiler's own occupancy figure, which does not see
    Triton's LDS, allocated at launch)."""

    lds_bytes: int = 64 * 1024
    simds: int = 4
    waves_per_simd: int = 8


CDNA2 = CULimits()  # gfx90a (MI200)
CDNA3 = CULimits()  # gfx942 (MI300)
CDNA4 = CULimits(lds_bytes=160 * 1024)  # gfx950 (MI350)


@dataclass(frozen=True)
class CUOccupancy:
    waves_per_simd: int
    fraction: float  # waves per SIMD / the most a SIMD holds
    limiter: str  # "registers" (the compiler's figure) or "LDS"


def cu_occupancy(compiler_waves: Optional[int], waves_per_block: int, lds_bytes: int,
                 cu: CULimits = CDNA3) -> Optional[CUOccupancy]:
    """Waves per SIMD: the compiler's register-bound figure, lowered by the LDS a block
    of ``waves_per_block`` waves takes; None when the compiler gave none."""
    if compiler_waves is None or waves_per_block < 1:
        return None
    waves, limiter = min(compiler_waves, cu.waves_per_simd), "registers"
    if lds_bytes > 0:
        blocks = cu.lds_bytes // lds_bytes
        by_lds = (blocks * waves_per_block) // cu.simds
        if by_lds < waves:
            waves, limiter = by_lds, "LDS"
    return CUOccupancy(waves, waves / cu.waves_per_simd, limiter)


@dataclass(frozen=True)
class Occupancy:
    blocks: int  # resident blocks per SM
    warps: int  # resident warps per SM
    fraction: float  # warps / max warps
    limiter: str  # "threads", "registers", "shared memory", "blocks"


def occupancy(regs_per_thread: Optional[int], warps_per_block: int, smem_bytes: int, sm: SMLimits = SM90) -> Optional[Occupancy]:
    """Theoretical occupancy of one SM; None when the register count is unknown."""
    if regs_per_thread is None or regs_per_thread < 0 or warps_per_block < 1:
        return None
    max_warps = sm.threads // sm.warp_size
    limits = {
        "threads": sm.threads // (warps_per_block * sm.warp_size),
        "blocks": sm.blocks,
    }
    if regs_per_thread > 0:
        regs_per_warp = math.ceil(regs_per_thread * sm.warp_size / sm.reg_alloc_unit) * sm.reg_alloc_unit
        limits["registers"] = (sm.regs // regs_per_warp) // warps_per_block
    per_block_smem = smem_bytes + sm.smem_reserved_per_block
    limits["shared memory"] = sm.smem_bytes // per_block_smem
    limiter = min(limits, key=lambda k: (limits[k], list(limits).index(k)))
    blocks = max(0, limits[limiter])
    warps = blocks * warps_per_block
    return Occupancy(blocks, warps, warps / max_warps, limiter)


@dataclass
class Variant:
    """One compiled kernel variant."""

    kernel: str  # e.g. "kernels_new._convert_req_index_to_global_index_kernel"
    key: str  # the compiled kernel's hash
    constexprs: dict = field(default_factory=dict)
    num_warps: Optional[int] = None
    n_regs: Optional[int] = None
    n_spills: Optional[int] = None
    shared: Optional[int] = None
    grids: set = field(default_factory=set)

    def row(self) -> dict:
        occ = occupancy(self.n_regs, self.num_warps or 0, self.shared or 0)
        c = self.constexprs
        return {
            "kernel": self.kernel,
            "variant": describe_constexprs(c),
            "num_warps": self.num_warps,
            "regs_per_thread": self.n_regs,
            "spills": self.n_spills,
            "shared_bytes": self.shared,
            "blocks_per_sm": occ.blocks if occ else None,
            "occupancy": round(occ.fraction, 3) if occ else None,
            "occupancy_limiter": occ.limiter if occ else "",
            "grids": " ".join(f"{g[0]}x{g[1]}" for g in sorted(self.grids))[:80],
            "hash": self.key[:12],
        }


# The constexprs worth naming in a one-line description, in this order.
_NAMED = ("NUM_TOPK_TOKENS", "BLOCK_N", "SINGLE_TILE", "COUNT_VALID", "COMPACT_TO_FRONT", "HAS_PREFILL", "DCP_SIZE")


def describe_constexprs(c: dict) -> str:
    short = {"NUM_TOPK_TOKENS": "K", "BLOCK_N": "BLOCK_N", "SINGLE_TILE": "single", "COUNT_VALID": "count",
             "COMPACT_TO_FRONT": "compact", "HAS_PREFILL": "prefill", "DCP_SIZE": "dcp"}
    parts = []
    for name in _NAMED:
        if name in c:
            v = c[name]
            parts.append(f"{short[name]}={int(v) if isinstance(v, bool) else v}")
    return " ".join(parts)


def compiled_facts(compiled) -> dict:
    """n_regs, n_spills, shared, num_warps of a CompiledKernel (None where unknown)."""
    try:
        compiled._init_handles()  # loads the binary once: fills n_regs / n_spills
    except Exception:
        pass
    meta = getattr(compiled, "metadata", None)
    return {
        "n_regs": _int_or_none(getattr(compiled, "n_regs", None)),
        "n_spills": _int_or_none(getattr(compiled, "n_spills", None)),
        "shared": _int_or_none(getattr(meta, "shared", None)),
        "num_warps": _int_or_none(getattr(meta, "num_warps", None)),
    }


def _int_or_none(v) -> Optional[int]:
    try:
        return None if v is None else int(v)
    except (TypeError, ValueError):
        return None


class VariantBook:
    """Every compiled variant seen, keyed by (kernel label, compiled hash)."""

    def __init__(self):
        self.variants: dict[tuple, Variant] = {}

    def add(self, label: str, compiled, constexprs: dict, grid=None) -> Optional[Variant]:
        if compiled is None or not hasattr(compiled, "metadata"):
            return None  # the interpreter returns nothing compiled
        key = str(getattr(compiled, "hash", id(compiled)))
        v = self.variants.get((label, key))
        if v is None:
            facts = compiled_facts(compiled)
            v = Variant(label, key, dict(constexprs), facts["num_warps"], facts["n_regs"], facts["n_spills"], facts["shared"])
            self.variants[(label, key)] = v
        if grid is not None:
            g = tuple(grid) + (1,) * (2 - len(tuple(grid)))
            v.grids.add((g[0], g[1]))
        return v

    def rows(self) -> list[dict]:
        ordered = sorted(self.variants.values(), key=lambda v: (v.kernel, describe_constexprs(v.constexprs), v.num_warps or 0))
        return [v.row() for v in ordered]


def _constexprs_of(jit_fn, kwargs: dict) -> dict:
    names = set(getattr(jit_fn, "arg_names", ()) or ())
    constexpr_names = set()
    for p in getattr(jit_fn, "params", ()) or ():
        if getattr(p, "is_constexpr", False):
            constexpr_names.add(p.name)
    wanted = constexpr_names or names
    return {k: v for k, v in kwargs.items() if k in wanted and isinstance(v, (int, bool, str))}


@contextlib.contextmanager
def recording(book: VariantBook, kernels: dict) -> Iterator[VariantBook]:
    """Within the block, every launch of the ``kernels`` (label -> JITFunction) through
    ``kernel[grid](...)`` is recorded in ``book``. Restores the launch entries after."""
    patched = []
    for label, fn in kernels.items():
        run = getattr(fn, "run", None)
        if run is None or "run" in vars(fn):
            continue  # nothing to wrap, or already wrapped

        def wrapped(*args, _run=run, _label=label, _fn=fn, **kwargs):
            compiled = _run(*args, **kwargs)
            try:
                book.add(_label, compiled, _constexprs_of(_fn, kwargs), kwargs.get("grid"))
            except Exception:
                pass  # recording must never break a launch
            return compiled

        fn.run = wrapped
        patched.append(fn)
    try:
        yield book
    finally:
        for fn in patched:
            del fn.run


def jit_cache_variants(book: VariantBook, kernels: dict) -> None:
    """Add every variant in the kernels' JIT caches that ``recording`` did not see
    (constexprs unknown: the row names the cache key instead)."""
    seen = {key for (_, key) in book.variants}
    for label, fn in kernels.items():
        caches = getattr(fn, "device_caches", None) or getattr(fn, "cache", None) or {}
        for entry in list(caches.values()):
            cache = entry[0] if isinstance(entry, tuple) and entry and isinstance(entry[0], dict) else entry
            if not isinstance(cache, dict):
                continue
            for cache_key, compiled in list(cache.items()):
                if hasattr(compiled, "metadata") and str(getattr(compiled, "hash", id(compiled))) not in seen:
                    book.add(label, compiled, {"cache_key": str(cache_key)[:60]})


def jit_variant_count(kernels: dict) -> int:
    """How many compiled variants the kernels' in-memory JIT caches hold (each one was
    compiled or loaded from Triton's disk cache in this process)."""
    n = 0
    for fn in kernels.values():
        for entry in list((getattr(fn, "device_caches", None) or {}).values()):
            cache = entry[0] if isinstance(entry, tuple) and entry and isinstance(entry[0], dict) else entry
            if isinstance(cache, dict):
                n += sum(1 for c in cache.values() if hasattr(c, "metadata"))
    return n


def bench_kernels() -> dict:
    """label -> JITFunction of the two vendored kernels."""
    import kernels_new
    import kernels_old

    return {
        "old": kernels_old._convert_req_index_to_global_index_kernel,
        "new": kernels_new._convert_req_index_to_global_index_kernel,
    }


def format_rows(rows: list[dict]) -> str:
    """The plain-text printout ``bench`` shows (issue 12): one line per variant."""
    if not rows:
        return "compiled variants: none recorded (no kernel was compiled in this process, or the interpreter ran)"
    lines = ["compiled variants (registers/thread, spills, shared memory, warps, theoretical occupancy on an SM90 SM):"]
    for r in rows:
        occ = "?" if r["occupancy"] is None else f"{100 * r['occupancy']:.0f}% ({r['blocks_per_sm']} blocks, {r['occupancy_limiter']})"
        lines.append(
            f"  {r['kernel']:>4} {r['variant']:<58} warps {r['num_warps']!s:>2}  regs {r['regs_per_thread']!s:>3}  "
            f"spills {r['spills']!s:>4}  smem {r['shared_bytes']!s:>6} B  occupancy {occ}"
        )
    return "\n".join(lines)
