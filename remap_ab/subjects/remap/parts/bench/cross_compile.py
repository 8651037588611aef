"""Compile every variant an implementation's wrappers launch for a GPU this machine
does not have, and read what the compiler made of it (issue 22 §1).

Triton compiles without a GPU: ``triton.compile(ASTSource(...), target=GPUTarget(...))``
gives a cubin (ptxas ships in the wheel) or an hsaco (so does the AMD linker). To get
*the* variant a real launch compiles, nothing here builds a signature by hand: the
implementation's public wrapper is called on small CPU inputs of the case, and every
``kernel[grid](...)`` it makes is caught before launching and bound by Triton's own
binder for the target's backend (strides of 1 become constants, integers and pointers
divisible by 16 get the divisibility attribute, ``None`` pointers are specialised away,
``num_warps`` is whatever the wrapper passes or the backend's default). That binding is
compiled.

Figures: NVIDIA from the ptxas log of the compile (registers, spill stores, stack
frame), AMD from the ``.amdgcn`` metadata (VGPRs, AGPRs, SGPRs, spilled registers,
private segment = scratch, the compiler's occupancy); shared memory / LDS from Triton's
metadata (``shared``). Occupancy: ``resources.occupancy`` with the target's limits.

Runs in worker processes (``compile_task``): Triton must be imported there without the
interpreter, which the command line turns on in the parent on a machine without a GPU.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from remap_ab import runtime
from remap_ab import runtime as remap_backend
from remap_ab.errors import exception_line
from remap_ab.processes import pool
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.parts.bench import resources


@dataclass(frozen=True)
class Target:
    name: str
    backend: str  # "cuda" or "hip"
    arch: Any  # compute capability (int) or gfx name
    warp_size: int
    limits: Any  # resources.SMLimits (cuda) or resources.CULimits (hip)


TARGETS = {
    "sm_80": Target("sm_80", "cuda", 80, 32, resources.SM80),
    "sm_90": Target("sm_90", "cuda", 90, 32, resources.SM90),
    "sm_100": Target("sm_100", "cuda", 100, 32, resources.SM100),
    "sm_120": Target("sm_120", "cuda", 120, 32, resources.SM120),
    "gfx90a": Target("gfx90a", "hip", "gfx90a", 64, resources.CDNA2),
    "gfx942": Target("gfx942", "hip", "gfx942", 64, resources.CDNA3),
    "gfx950": Target("gfx950", "hip", "gfx950", 64, resources.CDNA4),
}
DEFAULT_TARGETS = tuple(TARGETS)

# Every path the wrappers serve: CaseConfig fields (issue 22 §1).
PATHS: dict[str, dict[str, Any]] = {
    "counts": {"mode": "convert", "counts": True},
    "nocounts": {"mode": "convert", "counts": False},
    "prefill": {"mode": "convert", "counts": True, "prefill_fraction": 0.5},
    "prefill-nocounts": {"mode": "convert", "counts": False, "prefill_fraction": 0.5},
    "dcp-inplace": {"mode": "dcp", "dcp_size": 4, "compact": False, "counts": True},
    "dcp-inplace-nocounts": {"mode": "dcp", "dcp_size": 4, "compact": False, "counts": False},
    "dcp-compact": {"mode": "dcp", "dcp_size": 4, "compact": True, "counts": True},
}
DEFAULT_PATHS = tuple(PATHS)
# 384 and 2176 (17 x 128, a width seen in the field) are not powers of two: tiled in both.
DEFAULT_TOPKS = (128, 256, 384, 512, 1024, 2048, 2176, 4096, 8192, 16384)
DEFAULT_BLOCK_NS = (128,)
TOKENS = 2  # the grid's first axis; no compiled variant depends on it


@dataclass(frozen=True)
class Task:
    """One worker's job: one implementation on one target, one path, every K and BLOCK_N."""

    side: str  # "A" or "B"
    impl: str  # a registry name
    target: str
    path: str
    topks: tuple
    block_ns: tuple


def tasks_for(a: str, b: str, targets: Sequence[str], paths: Sequence[str], topks: Sequence[int],
              block_ns: Sequence[int]) -> list[Task]:
    # Targets outermost within a side-pair, so the two workers finish a target together.
    return [Task(side, impl, t, p, tuple(topks), tuple(block_ns))
            for t in targets for p in paths for side, impl in (("A", a), ("B", b))]


def _compile_only_process() -> None:
    # Triton decides interpreter-or-compiler when a kernel module is imported.

    runtime.select_compile_only()


@contextlib.contextmanager
def captured_launches(target):
    """Within the block, ``kernel[grid](...)`` of any Triton kernel launches nothing: it
    is bound as Triton binds a launch for ``target`` and appended to the list yielded,
    as ``(jit_fn, signature, constexprs, attrs, options, grid)``."""
    from triton import knobs
    from triton.compiler import make_backend
    from triton.runtime import jit


    backend = make_backend(target)
    binders: dict = {}
    launches: list = []

    def bound(launch, fn, *args, grid, warmup, **kwargs):
        # The same two options Triton's own run adds before binding.
        kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
        kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
        binder = binders.get(id(fn))
        if binder is None:
            binder = binders[id(fn)] = jit.create_function_from_signature(fn.signature, fn.params, backend)
        args_bound, specialization, options = binder(*args, **kwargs)
        options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, args_bound, specialization, options)
        launches.append((fn, signature, constexprs, attrs, options, grid))
        return None

    with remap_backend.jit_launches_through(bound):
        yield launches


PTXAS_FACTS_FILE = "remap_ab_ptxas.json"
_PTXAS = {
    "regs": re.compile(r"Used (\d+) registers"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "stack": re.compile(r"(\d+) bytes stack frame"),
}
_AMDGCN = {
    "vgprs": re.compile(r"\.vgpr_count:\s+(\d+)"),
    "agprs": re.compile(r"\.agpr_count:\s+(\d+)"),
    "sgprs": re.compile(r"\.sgpr_count:\s+(\d+)"),
    "spilled_vgprs": re.compile(r"\.vgpr_spill_count:\s+(\d+)"),
    "spilled_sgprs": re.compile(r"\.sgpr_spill_count:\s+(\d+)"),
    "scratch": re.compile(r"\.private_segment_fixed_size:\s+(\d+)"),
    "compiler_occupancy": re.compile(r"; Occupancy: (\d+)"),
}


def _first_int(pattern, text: str) -> Optional[int]:
    m = pattern.search(text)
    return int(m.group(1)) if m else None


def ptxas_facts(log: str) -> dict:
    f = {k: _first_int(p, log) for k, p in _PTXAS.items()}
    return {"regs": f["regs"], "spill_bytes": f["spill_stores"], "spill_load_bytes": f["spill_loads"], "scratch_bytes": f["stack"]}


def amdgcn_facts(asm: str) -> dict:
    f = {k: _first_int(p, asm) for k, p in _AMDGCN.items()}
    return {"vgprs": f["vgprs"], "agprs": f["agprs"], "sgprs": f["sgprs"], "spilled_vgprs": f["spilled_vgprs"],
            "spilled_sgprs": f["spilled_sgprs"], "scratch_bytes": f["scratch"], "compiler_occupancy": f["compiler_occupancy"]}


def compile_launch(launch, target: Target) -> dict:
    """Compile one bound launch for ``target``; the figures of the result."""
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.cache import get_cache_manager

    fn, signature, constexprs, attrs, options, _ = launch
    gpu = GPUTarget(target.backend, target.arch, target.warp_size)
    source = ASTSource(fn, signature, constexprs, attrs)

    def build(always: bool):
        log = io.StringIO()
        with knobs.nvidia.scope(), knobs.compilation.scope():
            knobs.nvidia.dump_ptxas_log = target.backend == "cuda"
            knobs.compilation.always_compile = always
            knobs.compilation.store_binary_only = False  # the figures read its PTX/AMDGCN, whatever TRITON_STORE_BINARY_ONLY says
            with contextlib.redirect_stdout(log):
                return triton.compile(source, target=gpu, options=options.__dict__), log.getvalue()

    kernel, log = build(False)
    ptxas: Optional[dict] = None
    if target.backend == "cuda":
        # ptxas runs (and logs) only on a compile that misses Triton's cache; its
        # figures are kept in the kernel's cache folder for the next run.
        cache = get_cache_manager(kernel.hash)
        if _PTXAS["regs"].search(log):
            ptxas = ptxas_facts(log)
            cache.put(json.dumps(ptxas), PTXAS_FACTS_FILE, binary=False)
        else:
            saved = cache.get_file(PTXAS_FACTS_FILE)
            if saved:
                ptxas = json.loads(Path(saved).read_text())
            else:
                kernel, log = build(True)
                ptxas = ptxas_facts(log)
                cache.put(json.dumps(ptxas), PTXAS_FACTS_FILE, binary=False)
    meta = kernel.metadata
    warps = int(getattr(meta, "num_warps", options.num_warps))
    shared = int(getattr(meta, "shared", 0) or 0)
    facts: dict = {"num_warps": warps, "shared_bytes": shared}
    if target.backend == "cuda":
        facts.update(ptxas or {})
        ptx_target = re.search(r"\.target (\w+)", kernel.asm.get("ptx", ""))
        facts["arch"] = ptx_target.group(1) if ptx_target else target.name
        occ = resources.occupancy(facts["regs"], warps, shared, target.limits)
        facts["occupancy"] = round(occ.fraction, 3) if occ else None
        facts["occupancy_detail"] = f"{occ.blocks} blocks/SM, {occ.limiter}" if occ else ""
    else:
        facts.update(amdgcn_facts(kernel.asm.get("amdgcn", "")))
        facts["arch"] = target.name
        occ_amd = resources.cu_occupancy(facts["compiler_occupancy"], warps, shared, target.limits)
        facts["occupancy"] = round(occ_amd.fraction, 3) if occ_amd else None
        facts["occupancy_detail"] = f"{occ_amd.waves_per_simd} waves/SIMD, {occ_amd.limiter}" if occ_amd else ""
    facts["spills"] = spills(facts)
    return facts


def specialisation(launch) -> dict:
    """What Triton's binder made of the launch's non-constexpr arguments: those that
    became constants (a stride of 1, a None pointer) and those it knows are divisible
    by 16 (the real launch's specialisation, shown beside its figures)."""
    fn, _, constexprs, attrs, _, _ = launch
    names = [p.name for p in fn.params]
    declared = {p.name for p in fn.params if p.is_constexpr}
    constants = [f"{names[path[0]]}={value}" for path, value in constexprs.items()
                 if len(path) == 1 and names[path[0]] not in declared]
    divisible = [names[path[0]] for path, specs in attrs.items()
                 if len(path) == 1 and any(spec[0] == "tt.divisibility" and spec[1] == 16 for spec in specs)]
    return {"specialised_constants": " ".join(constants), "divisible_by_16": " ".join(divisible)}


def spills(facts: dict) -> bool:
    """Whether the compiled variant spills registers to memory."""
    return any((facts.get(k) or 0) > 0 for k in ("spill_bytes", "spilled_vgprs", "spilled_sgprs"))


def _target_error(target: Target) -> Optional[str]:
    """None when this Triton can compile for ``target``, else why not (one line)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend

    try:
        make_backend(GPUTarget(target.backend, target.arch, target.warp_size))
    except Exception as exc:
        return f"this Triton has no {target.backend} backend ({type(exc).__name__})"
    return None


def compile_task(task: Task) -> list[dict]:
    """Rows for every (K, BLOCK_N) of ``task``: bind through the wrapper, compile. A
    variant that fails to compile is a row with ``error``; a target this Triton cannot
    compile for, one row with ``unsupported``."""
    _compile_only_process()
    import triton


    target = TARGETS[task.target]
    base = {"side": task.side, "impl": task.impl, "target": task.target, "triton": triton.__version__, "path": task.path}
    why = _target_error(target)
    if why:
        return [{**base, "unsupported": why}]
    from triton.backends.compiler import GPUTarget

    impl = registry.get(task.impl)
    rows = []
    for block_n in task.block_ns:
        for k in task.topks:
            if k % block_n:
                continue
            config = CaseConfig(topk=k, block_n=block_n, tokens=TOKENS, **PATHS[task.path])
            single, launched_bn, tiles, _ = impl.tiling(config)
            row = {**base, "topk": k, "block_n": block_n, "single_tile": single, "launched_block_n": launched_bn,
                   "tiles_per_row": tiles}
            inputs = generate_inputs(config)
            try:
                with captured_launches(GPUTarget(target.backend, target.arch, target.warp_size)) as launches:
                    impl(config, inputs)
            except Exception as exc:
                rows.append({**row, "error": f"binding the launch failed: {exception_line(exc)[:300]}"})
                continue
            if not launches:
                rows.append({**row, "error": "the wrapper launched no Triton kernel"})
                continue
            for i, launch in enumerate(launches):
                start = time.perf_counter()
                entry = {**row, "kernel": launch[0].__name__ + (f"#{i}" if len(launches) > 1 else ""),
                         "grid": "x".join(str(g) for g in launch[5]) if isinstance(launch[5], tuple) else str(launch[5])}
                entry.update(specialisation(launch))
                try:
                    entry.update(compile_launch(launch, target))
                except Exception as exc:
                    text = exception_line(exc)
                    if _unsupported_arch(text):
                        return [{**base, "unsupported": text[:200]}]
                    entry["error"] = text[:400]
                entry["compile_s"] = round(time.perf_counter() - start, 3)
                rows.append(entry)
    return rows


def _unsupported_arch(text: str) -> bool:
    return bool(re.search(r"not (a )?(supported|recognized)|unsupported|Unknown (target|processor)|is not defined for option",
                          text, re.IGNORECASE))


# --- What the rows say (no Triton needed below) -------------------------------------

def _key(r: dict) -> tuple:
    return (r["target"], r["path"], r.get("topk"), r.get("block_n"))


def known_spill(r: dict, allowed: Sequence[str]) -> bool:
    """Whether ``r`` is named by an ``--allow-spill TARGET:PATH:K`` entry (``*`` for any)."""
    for entry in allowed:
        parts = entry.split(":")
        want = (r["target"], r["path"], str(r.get("topk")))
        if len(parts) == 3 and all(p in ("*", w) for p, w in zip(parts, want)):
            return True
    return False


def regressions(rows: Sequence[dict], allowed: Sequence[str] = ()) -> list[str]:
    """One line per variant where B fails to compile, or spills where A compiled
    without spilling (the CI gate: exit 1 when any); a spill named in ``allowed`` is
    left out (``known_regressions`` lists those)."""
    return [line for r, line in _regressions(rows) if "fails to compile" in line or not known_spill(r, allowed)]


def known_regressions(rows: Sequence[dict], allowed: Sequence[str]) -> list[str]:
    return [line for r, line in _regressions(rows) if "fails to compile" not in line and known_spill(r, allowed)]


def _regressions(rows: Sequence[dict]) -> list[tuple[dict, str]]:
    a = {_key(r): r for r in rows if r["side"] == "A" and "unsupported" not in r}
    out: list[tuple[dict, str]] = []
    for r in rows:
        if r["side"] != "B" or "unsupported" in r:
            continue
        where = f"{r['target']} {r['path']} K={r['topk']} BLOCK_N={r['block_n']}"
        if r.get("error"):
            out.append((r, f"{where}: B ({r['impl']}) fails to compile: {r['error'][:200]}"))
            continue
        mine = a.get(_key(r))
        if r.get("spills") and mine is not None and not mine.get("error") and not mine.get("spills"):
            out.append((r, f"{where}: B ({r['impl']}) spills ({spill_text(r)}), A ({mine['impl']}) does not"))
    return out


def spill_text(r: dict) -> str:
    if r.get("spill_bytes") is not None:
        return f"{r['spill_bytes']} B spill stores, {r.get('regs')} registers"
    return f"{r.get('spilled_vgprs') or 0} VGPRs / {r.get('spilled_sgprs') or 0} SGPRs spilled, {r.get('vgprs')} VGPRs"


def spill_onsets(rows: Sequence[dict]) -> list[str]:
    """Where spills begin, per side, target and path: the smallest K that spills."""
    groups: dict = {}
    for r in rows:
        if "unsupported" in r or r.get("error"):
            continue
        groups.setdefault((r["side"], r["impl"], r["target"], r["path"], r["block_n"]), []).append(r)
    out = []
    for (side, impl, target, path, bn), mine in sorted(groups.items(), key=lambda kv: (kv[0][2], kv[0][3], kv[0][0])):
        mine.sort(key=lambda r: r["topk"])
        spilling = [r for r in mine if r.get("spills")]
        where = f"{target} {path} {side} ({impl}), BLOCK_N {bn}"
        if spilling:
            first = spilling[0]
            out.append(f"{where}: spills from K = {first['topk']} ({spill_text(first)}; "
                       f"{first['tiles_per_row']} tile(s) of {first['launched_block_n']}, {first['num_warps']} warps)")
        else:
            out.append(f"{where}: no spills up to K = {mine[-1]['topk']}")
    return out


def unsupported_notes(rows: Sequence[dict]) -> list[str]:
    seen: dict = {}
    for r in rows:
        if "unsupported" in r:
            seen.setdefault(r["target"], f"{r['target']}: Triton {r['triton']} cannot compile for it ({r['unsupported']})")
    return list(seen.values())


def _cell(r: Optional[dict]) -> str:
    if r is None:
        return "-"
    if r.get("error"):
        return "COMPILE ERROR"
    shape = f"{r['tiles_per_row']}x{r['launched_block_n']}/{r['num_warps']}w"
    occ = "?" if r.get("occupancy") is None else f"{100 * r['occupancy']:.0f}%"
    if r.get("regs") is not None or r.get("spill_bytes") is not None:
        regs = f"{r.get('regs')} regs, spill {r.get('spill_bytes')} B"
    else:
        regs = (f"{r.get('vgprs')}v/{r.get('agprs')}a/{r.get('sgprs')}s, spill "
                f"{(r.get('spilled_vgprs') or 0) + (r.get('spilled_sgprs') or 0)}")
    return f"{shape} {regs}, scratch {r.get('scratch_bytes')} B, smem {r.get('shared_bytes')} B, occ {occ}"


def format_tables(rows: Sequence[dict]) -> str:
    """One table per target: each (path, K, BLOCK_N) with A and B side by side."""
    lines = []
    targets = list(dict.fromkeys(r["target"] for r in rows))
    for t in targets:
        mine = [r for r in rows if r["target"] == t and "unsupported" not in r]
        if not mine:
            continue
        arch = next((r.get("arch") for r in mine if r.get("arch")), t)
        lines.append(f"{t} ({arch}, Triton {mine[0]['triton']}): shape = tiles x BLOCK_N / warps; "
                     + ("regs" if mine[0].get("regs") is not None else "VGPRs/AGPRs/SGPRs") + ", spills, scratch, "
                     "shared memory, occupancy")
        by = {(r["side"], r["path"], r["topk"], r["block_n"]): r for r in mine}
        keys = sorted({(r["path"], r["topk"], r["block_n"]) for r in mine},
                      key=lambda k: (list(PATHS).index(k[0]) if k[0] in PATHS else 99, k[2], k[1]))
        for path, k, bn in keys:
            a, b = by.get(("A", path, k, bn)), by.get(("B", path, k, bn))
            lines.append(f"  {path:<20} K={k:<5} BN={bn:<4} A: {_cell(a):<72} B: {_cell(b)}")
    return "\n".join(lines)


TABLE_COLUMNS = ("target", "arch", "triton", "side", "impl", "path", "topk", "block_n", "single_tile", "tiles_per_row",
                 "launched_block_n", "num_warps", "regs", "vgprs", "agprs", "sgprs", "spill_bytes", "spilled_vgprs",
                 "spilled_sgprs", "scratch_bytes", "shared_bytes", "occupancy", "occupancy_detail", "spills", "error",
                 "specialised_constants", "divisible_by_16", "compile_s")


def table_rows(rows: Sequence[dict], target: Optional[str] = None) -> list[dict]:
    """Rows with one fixed set of columns (the page's and the CSV's), unsupported notes out."""
    return [{c: r.get(c) for c in TABLE_COLUMNS} for r in rows
            if "unsupported" not in r and (target is None or r["target"] == target)]


def run(a: str, b: str, targets: Sequence[str], paths: Sequence[str], topks: Sequence[int], block_ns: Sequence[int],
        workers: int) -> list[dict]:
    """Every row, compiled in ``workers`` processes (pool.map_tasks)."""

    tasks = tasks_for(a, b, targets, paths, topks, block_ns)
    order = {t: i for i, t in enumerate(tasks)}
    done = sorted(pool.map_tasks(compile_task, tasks, workers), key=lambda tr: order[tr[0]])
    return [r for _, rows in done for r in rows]
