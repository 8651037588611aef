"""Seeded kernel mutants: realistic bugs planted in the real kernels, which the suite
must catch.

A mutant is declared as data: the kernel package it targets (``old`` or ``new``), one
line saying what a developer might have written by mistake, and the exact source edit
as ``(old_text, new_text)`` pairs applied to ``kernels_<target>/_remap.py``. Each
``old_text`` must occur exactly once in the current source, so a kernel refactor that
moves the code a mutant edits fails loudly (``MutantError``) instead of silently
testing nothing.

A mutant is *generated*, never hand-copied: the target package is copied into a
temporary directory under the unique package name ``mutant_<id>`` (imports renamed),
the edits are applied to the copy, and the directory goes on ``PYTHONPATH`` so the
registry loads it by its dotted name like any other implementation.

Each mutant must also be *observable*: its ``witness`` is a case on which its output
differs from the unmutated kernel's (measured by ``find_witness``, not assumed). A
mutant declared ``equivalent`` is one that provably cannot change any output; it is
listed, its witness search is run and must find nothing, and it is never counted as
a kill.

``remap-ab mutants`` (``remap_ab/commands/mutants.py``) runs, per mutant, the
ci-profile property suite in a subprocess and a small sweep subset, and prints the
kill matrix.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from remap_ab import registry
from remap_ab.config import CaseConfig
from remap_ab.errors import RemapABError

REPO_ROOT = Path(__file__).resolve().parent.parent
TARGETS = {side: registry.BUILTIN[side] for side in ("old", "new")}  # the kernel packages
KERNEL_FILE = "_remap.py"


class MutantError(RemapABError):
    """A mutant whose edit no longer applies, an unknown mutant id, or a broken run."""


@dataclass(frozen=True)
class Mutant:
    """One seeded bug.

    id           short unique name (letters, digits, underscores).
    target       "old" or "new": the kernel package the edit applies to.
    area         the SPEC section it breaks.
    description  one line: what a developer might have written by mistake.
    edits        ``(old_text, new_text)`` pairs applied in order to
                 ``kernels_<target>/_remap.py``; each ``old_text`` must match exactly once.
    witness      CaseConfig fields of a case on which the mutant's output differs from
                 the real kernel's (checked by ``find_witness``).
    equivalent   None, or why the mutant cannot change any output (never counted).
    """

    id: str
    target: str
    area: str
    description: str
    edits: tuple
    witness: dict
    equivalent: Optional[str] = None

    @property
    def package(self) -> str:
        return f"mutant_{self.id}"

    @property
    def sides(self) -> tuple[str, str]:
        """(A, B) for the A/B checks: the mutant replaces its own side."""
        return ("old", self.package) if self.target == "new" else (self.package, "new")

    @property
    def original(self) -> str:
        return self.target

    def witness_config(self) -> CaseConfig:
        return CaseConfig(**self.witness)


# Small cases: each runs in well under a second in the interpreter.
_CONVERT = dict(mode="convert", tokens=4, topk=256, block_n=64, blocks_per_req=16, block_size=16, counts=True)
_DCP = dict(mode="dcp", tokens=4, topk=256, block_n=64, blocks_per_req=16, block_size=16, dcp_size=2, dcp_rank=1)

CATALOGUE: tuple[Mutant, ...] = (
    # §3.1 negative ids
    Mutant(
        "neg_check_dropped", "new", "§3.1 t < 0",
        "drops `invalid = t < 0`, trusting the block-range check to reject negative ids "
        "(but Triton's // truncates: -1 // 64 == 0 is an in-range block)",
        (("    # §3.1: any negative id is padding.\n    invalid = tok < 0\n", ""),
         ("invalid = invalid | (~valid_block) | remote", "invalid = (~valid_block) | remote")),
        dict(_CONVERT),
    ),
    Mutant(
        "neg_only_minus_one", "old", "§3.1 t < 0",
        "treats only -1 as padding (`t == -1`), the value the indexer normally writes, "
        "so other negative ids like -2 are remapped",
        (("invalid = tok < 0", "invalid = tok == -1"),),
        dict(_CONVERT, negatives="any", invalid_ratio=0.6),
    ),
    Mutant(
        "floor_division", "new", "§3.3-3.4 division",
        "uses Python-style floor division and modulo for the owner, block and offset "
        "instead of Triton's truncating ones",
        (("owner = (tok // CP_INTERLEAVE) % DCP_SIZE",
          "owner = ((tok // CP_INTERLEAVE) % DCP_SIZE + DCP_SIZE) % DCP_SIZE"),
         ("blk = local // BLOCK_SIZE",
          "blk = tl.where(local < 0, (local - (BLOCK_SIZE - 1)) // BLOCK_SIZE, local // BLOCK_SIZE)"),
         ("off = local % BLOCK_SIZE", "off = local - blk * BLOCK_SIZE")),
        dict(_DCP, negatives="any", invalid_ratio=0.6, interleave=4, compact=False),
        equivalent=(
            "floor and truncation differ only for a negative operand, and t // I, local and hence blk "
            "are negative only for lanes with t < 0, which §3.1 makes invalid whatever owner/blk/off say: they get -1, "
            "are not counted and are not stored by compaction; the only other use, the block-table "
            "load mask, stays in bounds either way and its value is discarded"
        ),
    ),
    # §3.3 DCP ownership and de-interleave
    Mutant(
        "owner_ignores_interleave", "new", "§3.3 owner",
        "computes the owning rank as `t mod S`, forgetting to divide by the interleave first",
        (("owner = (tok // CP_INTERLEAVE) % DCP_SIZE", "owner = tok % DCP_SIZE"),),
        dict(_DCP, interleave=4, compact=False),
    ),
    Mutant(
        "local_interleave_unscaled", "old", "§3.3 local",
        "de-interleaves with `⌊t/(S·I)⌋ + t mod I`, dropping the `· I` on the chunk index",
        (("local = (tok // (DCP_SIZE * CP_INTERLEAVE)) * CP_INTERLEAVE + tok % CP_INTERLEAVE",
          "local = (tok // (DCP_SIZE * CP_INTERLEAVE)) + tok % CP_INTERLEAVE"),),
        dict(_DCP, interleave=2, compact=False),
    ),
    Mutant(
        "remote_kept", "new", "§3.4 remote",
        "masks out-of-range blocks but forgets that lanes another DCP rank owns are invalid here",
        (("invalid = invalid | (~valid_block) | remote", "invalid = invalid | (~valid_block)"),),
        dict(_DCP, compact=False),
    ),
    # §3.4 block and offset
    Mutant(
        "blk_le_w", "old", "§3.4 valid_block",
        "accepts `blk <= W` instead of `blk < W`, reading one entry past the request's blocks",
        (("(blk < max_num_blocks_per_req)", "(blk <= max_num_blocks_per_req)"),),
        dict(_CONVERT, out_of_range=0.3),
    ),
    Mutant(
        "off_from_raw_token", "old", "§3.4 off",
        "takes the in-block offset from the global token id (`t mod B`) instead of the "
        "de-interleaved local position",
        (("off = local % BLOCK_SIZE", "off = tok % BLOCK_SIZE"),),
        dict(_DCP, compact=False),
    ),
    # §3.2, §3.6-3.7 prefill
    Mutant(
        "prefill_id_zero_paged", "old", "§3.2 is_prefill",
        "tests `p > 0` for a prefill row, so workspace request 0 is served from the paged cache",
        (("is_prefill = prefill_req >= 0", "is_prefill = prefill_req > 0"),),
        dict(_CONVERT, prefill_fraction=1.0),
    ),
    Mutant(
        "prefill_before_invalid", "new", "§3.6-3.7 precedence",
        "applies the -1 invalid mask before the prefill override, so invalid lanes of prefill "
        "rows get `start + t`",
        (("""    # §3.6: prefill rows address the workspace with the raw token id.
    if HAS_PREFILL:
        ws_start = tl.load(workspace_starts_ptr + prefill_req, mask=is_prefill, other=0)
        val = tl.where(is_prefill, ws_start + tok, val)

    # §3.7: invalidity has the last word.
    val = tl.where(invalid, -1, val)
""", """    # §3.7: invalidity has the last word.
    val = tl.where(invalid, -1, val)

    # §3.6: prefill rows address the workspace with the raw token id.
    if HAS_PREFILL:
        ws_start = tl.load(workspace_starts_ptr + prefill_req, mask=is_prefill, other=0)
        val = tl.where(is_prefill, ws_start + tok, val)
"""),),
        dict(_CONVERT, prefill_fraction=1.0),
    ),
    # §4 valid counts
    Mutant(
        "tiled_count_store", "new", "§4 tiled count",
        "stores each tile's count instead of `atomic_add`ing it on the tiled path: the row "
        "count is the last tile's",
        (("                tl.atomic_add(valid_counts_ptr + row, n_valid)",
          "                tl.store(valid_counts_ptr + row, n_valid)"),),
        dict(_CONVERT, topk=384, block_n=128),
    ),
    Mutant(
        "compact_count_not_stored", "new", "§4 single-tile count",
        "the single tile starts compaction at slot 0 and forgets to store the row's count there",
        (("            slot_base = 0\n            tl.store(valid_counts_ptr + row, n_valid)\n",
          "            slot_base = 0\n"),),
        dict(_DCP),
    ),
    Mutant(
        "count_only_when_compacting", "new", "§4 single-tile count",
        "the single tile writes its count only on the compaction path; the count-only path "
        "leaves the `empty` buffer unwritten",
        (("""            if SINGLE_TILE:
                tl.store(valid_counts_ptr + row, n_valid)
            else:
                tl.atomic_add(valid_counts_ptr + row, n_valid)""",
          """            if not SINGLE_TILE:
                tl.atomic_add(valid_counts_ptr + row, n_valid)"""),),
        dict(_CONVERT),
    ),
    Mutant(
        "atomic_counts_empty", "new", "§6 counts buffer",
        "allocates the counts with `empty` on the tiled path too, where the atomics accumulate "
        "into it (needs `zeros`)",
        (("alloc = torch.empty if single_tile else torch.zeros", "alloc = torch.empty"),),
        dict(_CONVERT, topk=384, block_n=128),
    ),
    # §5 compaction
    Mutant(
        "inclusive_prefix_sum", "new", "§5 exclusive prefix",
        "places each valid lane at the inclusive prefix sum (`cumsum`) instead of the exclusive one",
        (("excl = tl.cumsum(valid.to(tl.int32), axis=0) - valid.to(tl.int32)",
          "excl = tl.cumsum(valid.to(tl.int32), axis=0)"),),
        dict(_DCP),
    ),
    Mutant(
        "slot_base_dropped", "old", "§5 compaction base",
        "ignores the slot the atomic hands out and stores at `e` alone: every tile compacts "
        "to column 0",
        (("tl.store(out_row + (slot_base + excl) * out_stride1, val, mask=valid)",
          "tl.store(out_row + excl * out_stride1, val, mask=valid)"),),
        dict(_DCP),
    ),
    Mutant(
        "inplace_store_hoisted", "new", "§5 -1 tail",
        "hoists the in-place store above the compaction branch, so in-place values overwrite "
        "the -1 tail",
        (("    out_row = out_ptr + row * out_stride0\n    if COMPACT_TO_FRONT:\n",
          "    out_row = out_ptr + row * out_stride0\n    tl.store(out_row + cols * out_stride1, val)\n"
          "    if COMPACT_TO_FRONT:\n"),),
        dict(_DCP),
    ),
    Mutant(
        "compact_out_empty", "old", "§5-6 -1 tail",
        "allocates `out` with `empty_like` on the compaction path too, so the -1 tail is never written",
        (("out = torch.full_like(token_indices, -1)", "out = torch.empty_like(token_indices)"),),
        dict(_DCP),
    ),
    Mutant(
        "full_row_last_lane_dropped", "new", "§5 full row",
        "guards the compaction store against running off the row with `< K - 1`, dropping "
        "the last lane of a full row",
        (("tl.store(out_row + (slot_base + excl) * out_stride1, val, mask=valid)",
          "tl.store(out_row + (slot_base + excl) * out_stride1, val, "
          "mask=valid & (slot_base + excl < NUM_TOPK_TOKENS - 1))"),),
        dict(_DCP, invalid_ratio=0.0, row_layout="owned"),
    ),
    # §6 tiling and wrappers
    Mutant(
        "single_tile_any_k", "new", "§6 tiling",
        "drops the power-of-two guard: a non-power-of-two K is launched as one tile "
        "(tl.arange rejects it, as the GPU compiler does)",
        (("    if count_valid and is_pow2:", "    if count_valid:"),),
        dict(_CONVERT, topk=384, block_n=128),
    ),
    Mutant(
        "launch_caller_block_n", "new", "§6 tiling",
        "launches with the caller's BLOCK_N instead of the tiling's block_n: the single program "
        "covers (and counts) only the first tile",
        (("        BLOCK_N=block_n,", "        BLOCK_N=BLOCK_N,"),),
        dict(_CONVERT),
    ),
    Mutant(
        "dcp1_drops_counts", "new", "§6 dcp_size == 1",
        "the dcp_size == 1 shortcut forgets to forward return_valid_counts, returning a bare tensor",
        (("            return_valid_counts=return_valid_counts,\n", ""),),
        dict(_DCP, dcp_size=1, dcp_rank=0, tokens=3),
    ),
)

_BY_ID = {m.id: m for m in CATALOGUE}


def catalogue(only=None) -> list[Mutant]:
    """The catalogue, or the mutants named in ``only`` (ids), in catalogue order."""
    if not only:
        return list(CATALOGUE)
    unknown = [i for i in only if i not in _BY_ID]
    if unknown:
        raise MutantError(f"unknown mutant id(s) {', '.join(unknown)}; `remap-ab mutants --list` lists them")
    return [m for m in CATALOGUE if m.id in set(only)]


def get(mutant_id: str) -> Mutant:
    return catalogue([mutant_id])[0]


# --------------------------------------------------------------------------- generation

def kernel_source(target: str) -> str:
    return (REPO_ROOT / TARGETS[target] / KERNEL_FILE).read_text()


def mutated_source(m: Mutant, source: Optional[str] = None) -> str:
    """``kernels_<target>/_remap.py`` with the mutant's edits applied, each exactly once."""
    if m.target not in TARGETS:
        raise MutantError(f"mutant {m.id}: target {m.target!r} is not old or new")
    text = kernel_source(m.target) if source is None else source
    for i, (old, new) in enumerate(m.edits, 1):
        n = text.count(old)
        if n != 1:
            first = old.strip().splitlines()[0] if old.strip() else repr(old)
            raise MutantError(
                f"mutant {m.id}: edit {i} must match {TARGETS[m.target]}/{KERNEL_FILE} exactly once but matches "
                f"{n} times ({first!r}); the kernel changed: update the mutant's edit in remap_ab/mutants.py"
            )
        text = text.replace(old, new)
    try:
        compile(text, f"{m.package}/{KERNEL_FILE}", "exec")
    except SyntaxError as exc:
        raise MutantError(f"mutant {m.id}: the edited kernel does not parse ({exc})") from None
    return text


def _rename_imports(text: str, src_pkg: str, dst_pkg: str) -> str:
    return re.sub(rf"\b{src_pkg}(?=[.\s])", dst_pkg, text)


def materialize(m: Mutant, root: Path) -> str:
    """Write package ``mutant_<id>`` under ``root`` (which goes on sys.path /
    PYTHONPATH) and return its module name."""
    src_pkg = TARGETS[m.target]
    src_dir = REPO_ROOT / src_pkg
    dst = Path(root) / m.package
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for path in sorted(src_dir.glob("*.py")):
        text = mutated_source(m) if path.name == KERNEL_FILE else path.read_text()
        text = _rename_imports(text, src_pkg, m.package)
        (dst / path.name).write_text(text)
    leftover = [p.name for p in dst.glob("*.py") if re.search(rf"^\s*(from|import)\s+{src_pkg}\b", p.read_text(), re.M)]
    if leftover:
        raise MutantError(f"mutant {m.id}: {', '.join(leftover)} still import {src_pkg} after renaming")
    import importlib

    importlib.invalidate_caches()
    return m.package


# --------------------------------------------------------------------------- the sweep subset

# The sweep grid's points (remap_ab/grid.toml) that the mutant check runs: every path
# (convert, counts, prefill, dcp_size 1, DCP compacted and in place), K = 384 (tiled in
# both kernels) and 512 (single tile in new when counting), out-of-range lanes on, and
# two invalid ratios, which rotate the DCP size/interleave (4x1, 4x64), the flags and
# the negative-id kinds through the subset. 36 cases.
SWEEP_FILTERS = ("tokens=3", "k=384,512", "oor=on", "invalid=0.3,0.7")


@dataclass(frozen=True)
class SweepCase:
    config: CaseConfig
    label: str = ""

    @property
    def case_id(self) -> str:
        return self.config.case_id


def _edge_cases() -> list[SweepCase]:
    """Cases the grid does not hold: DCP rows whose every lane this rank owns
    (row_layout "owned"), so a compacted row is full (count == K), on the new kernel's
    single-tile path (K = 512) and on the tiled one (K = 384)."""
    base = dict(mode="dcp", tokens=3, block_size=64, block_n=128, blocks_per_req=64, dcp_size=4, dcp_rank=1,
                invalid_ratio=0.0, out_of_range=0.0, row_layout="owned", compact=True, counts=True)
    return [
        SweepCase(CaseConfig(**dict(base, topk=512)), "edge full-row k=512"),
        SweepCase(CaseConfig(**dict(base, topk=384, interleave=64, dcp_rank=3)), "edge full-row k=384"),
    ]


def sweep_subset() -> list[SweepCase]:
    """The grid points selected by SWEEP_FILTERS, then the edge cases."""
    from remap_ab import grid as gridmod

    g = gridmod.load()
    points = g.select(gridmod.parse_filters(g, list(SWEEP_FILTERS)))
    cases = [SweepCase(p.config, " ".join(f"{k}={v}" for k, v in p.labels)) for p in points]
    return cases + _edge_cases()


# --------------------------------------------------------------------------- witnesses

@dataclass
class Witness:
    """Where a mutant's output first differs from the real kernel's, on one case."""

    case_id: str
    config: dict
    kind: str  # "out", "counts", "error", "shape"
    row: int = -1
    col: int = -1
    original: object = None
    mutant: object = None
    lanes: int = 0
    source: str = "declared"  # the "declared" witness, or the "sweep" subset

    def line(self) -> str:
        cfg = CaseConfig(**self.config)
        where = f"row {self.row}" + (f", col {self.col}" if self.col >= 0 else "")
        if self.kind == "error":
            what = f"original returns, mutant raises {self.mutant}"
        elif self.kind == "shape":
            what = f"original returns {self.original}, mutant returns {self.mutant}"
        else:
            what = f"{self.kind} at {where}: original {self.original}, mutant {self.mutant} ({self.lanes} differ)"
        return f"case {self.case_id} (remap-ab run {cfg.cli_args()}): {what}"


def _first_diff(a, b):
    import torch

    if a is None and b is None:
        return None
    if a is None or b is None or tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
        desc = lambda t: "nothing" if t is None else f"{t.dtype} {tuple(t.shape)}"  # noqa: E731
        return ("shape", -1, -1, desc(a), desc(b), 0)
    bad = a != b
    if not bad.any():
        return None
    idx = torch.nonzero(bad)[0].tolist()
    row, col = (idx[0], idx[1]) if len(idx) == 2 else (idx[0], -1)
    return (None, row, col, int(a[tuple(idx)]), int(b[tuple(idx)]), int(bad.sum()))


def compare_to_original(m: Mutant, config: CaseConfig, source="declared"):
    """Run the real kernel and the mutant (already importable) on one case, both with
    uninitialised memory poisoned; return a Witness where their outputs differ, else None."""
    from remap_ab.inputs import generate_inputs
    from remap_ab.runner import run_implementation

    inputs = generate_inputs(config, device="cpu")
    orig = run_implementation(registry.get(m.original), config, inputs)
    mut = run_implementation(registry.get(m.package), config, inputs)

    def make(kind, row=-1, col=-1, o=None, mu=None, lanes=0):
        return Witness(config.case_id, config.to_dict(), kind, row, col, o, mu, lanes, source)

    if orig.error is not None:
        raise MutantError(f"the real {m.original} kernel raised on witness case {config.case_id}: {orig.error}")
    if mut.error is not None:
        return make("error", mu=mut.error[:160])
    for kind, a, b in (("out", orig.out, mut.out), ("counts", orig.counts, mut.counts)):
        d = _first_diff(a, b)
        if d is not None:
            return make(d[0] or kind, d[1], d[2], d[3], d[4], d[5])
    return None


def find_witness(m: Mutant) -> tuple[Optional[Witness], int]:
    """The declared witness case first, then the sweep subset: (witness or None, cases tried)."""
    corpus = [(m.witness_config(), "declared")]
    corpus += [(c.config, "sweep") for c in sweep_subset()]
    for tried, (config, source) in enumerate(corpus, 1):
        w = compare_to_original(m, config, source)
        if w is not None:
            return w, tried
    return None, len(corpus)


# --------------------------------------------------------------------------- checks

@dataclass
class CheckResult:
    """One check (``properties`` or ``sweep``) on one mutant."""

    check: str
    status: str  # "killed", "survived", "n/a", "timeout", "broken"
    seconds: float = 0.0
    killer: str = ""  # test node id or case id that failed first
    detail: str = ""  # first failure line
    examples: Optional[int] = None  # properties: valid examples of the killing test up to the kill; sweep: cases
    examples_total: Optional[int] = None  # examples (cases) run in the whole check up to the kill
    killers: list = field(default_factory=list)  # every failing test / case (all of them with --full)
    how: str = ""  # properties: "generated" or "regression @example"

    @property
    def killed(self) -> bool:
        return self.status == "killed"


def run_sweep(m: Mutant, full: bool = False) -> CheckResult:
    """The sweep subset with the mutant on its side, in this process (the mutant's
    package must be importable). Stops at the first failing case unless ``full``."""
    from remap_ab.runner import run_case

    a, b = m.sides
    start = time.perf_counter()
    res = CheckResult("sweep", "survived")
    cases = sweep_subset()
    for i, case in enumerate(cases, 1):
        v = run_case(case.config, a, b, device="cpu").verdict
        if v.passed:
            continue
        mine = [f for f in v.failures if f.impl == m.package]
        line = (mine or v.failures)[0].line()
        if not mine:
            line = "(the unmutated side failed: a harness bug) " + line
        res.killers.append(case.case_id)
        if res.status != "killed":
            res.status, res.killer, res.detail = "killed", case.case_id, f"{case.label}: {line}"
            res.examples = res.examples_total = i
        if not full:
            break
    res.seconds = time.perf_counter() - start
    if res.status != "killed":
        res.examples_total = len(cases)
    return res


def property_files() -> list[Path]:
    return sorted((REPO_ROOT / "tests").glob("test_properties_*.py"))


def property_tests(files=None) -> list[str]:
    """Node ids (``tests/file.py::test_name``) of the property suite's tests, in file order."""
    ids = []
    for f in property_files() if files is None else files:
        rel = f.relative_to(REPO_ROOT).as_posix()
        names = re.findall(r"^(?:async\s+)?def (test_\w+)", f.read_text(), re.M)
        ids += [f"{rel}::{n}" for n in names] if names else [rel]
    return ids


def _path_keywords(config: CaseConfig) -> list[str]:
    """Words naming the SPEC path a case exercises, as property tests name it."""
    if config.mode == "convert":
        return ["convert"]
    if config.dcp_size == 1:
        return ["size_one", "delegat"]
    return ["compact"] if config.compact else ["in_place", "inplace"]


def order_for(m: Mutant, tests: list[str]) -> list[str]:
    """The property tests, those named after the mutant's witness path first (a stable
    sort: the rest keep their order). Only the time to the first kill depends on it."""
    words = _path_keywords(m.witness_config())

    def rank(nodeid: str) -> int:
        name = nodeid.rsplit("::", 1)[-1]
        return 0 if any(w in name for w in words) else 1

    return sorted(tests, key=rank)


def _child_env(root: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    # -j mutants share the cores: one thread each.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.setdefault(var, "1")
    return env


def _pytest_args(m: Mutant, full: bool) -> list[str]:
    args = ["-q", "--no-header", "-p", "remap_ab.mutant_probe", "-p", "no:cacheprovider", "-p", "no:xdist",
            "-W", "ignore::DeprecationWarning", "--rootdir", str(REPO_ROOT)]
    if not full:
        args.append("-x")
    tests = property_tests()
    return args + (order_for(m, tests) if not full else tests)


def summarize_probe(probe: Path, returncode: int, output: str) -> CheckResult:
    """Turn the probe's records and pytest's exit status into a CheckResult."""
    records = []
    if probe.exists():
        for line in probe.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    tests = [r for r in records if r.get("kind") == "test"]
    failed = [r for r in tests if r["outcome"] == "failed"]
    res = CheckResult("properties", "survived")
    if returncode < 0:
        # A signal (e.g. SIGSEGV from an out-of-bounds access): a crash is a kill.
        started = [r for r in records if r.get("kind") == "start"]
        res.status = "killed"
        res.killer = started[-1]["nodeid"] if started else "(crash)"
        res.killers = [res.killer]
        res.detail = f"crashed (signal {-returncode}) " + " ".join(output.strip().splitlines()[-2:])[:300]
        return res
    if returncode not in (0, 1):
        res.status, res.detail = "broken", f"pytest exit {returncode}: " + " ".join(output.strip().splitlines()[-3:])[:300]
        return res
    examples = [r for r in records if r.get("kind") == "example"]
    if failed:
        first = failed[0]
        res.status, res.killer, res.detail = "killed", first["nodeid"], first.get("message", "")
        res.killers = [r["nodeid"] for r in failed]
        # Valid examples of the killing test up to and including its first failing one,
        # and of the whole run up to that point.
        mine = [e for e in examples if e.get("nodeid") == first["nodeid"]]
        n, how = _examples_to_first_failure(mine)
        res.examples, res.how = n, how
        before = [e for e in examples if e["seq"] < first["seq"] and e.get("nodeid") != first["nodeid"]]
        if n is not None:
            res.examples_total = sum(1 for e in before if _counts_as_example(e)) + n
    elif returncode == 1:
        res.status = "broken"
        res.detail = "pytest failed without a failing test: " + " ".join(output.strip().splitlines()[-3:])[:300]
    else:
        res.examples_total = sum(1 for e in examples if _counts_as_example(e))
    return res


def _is_failure(e: dict) -> bool:
    # Hypothesis reports a failing explicit @example as "gave_up" (no "failed" record).
    return e["status"] == "failed" or (e["status"] == "gave_up" and e.get("how") == "explicit example")


def _counts_as_example(e: dict) -> bool:
    """A valid example: passed or failed (not a draw Hypothesis rejected)."""
    return e["status"] == "passed" or _is_failure(e)


def _examples_to_first_failure(examples: list) -> tuple[Optional[int], str]:
    """(valid examples up to and including the first failing one, how it was generated)."""
    n = 0
    for e in examples:
        if _counts_as_example(e):
            n += 1
        if _is_failure(e):
            return n, ("regression @example" if e.get("how") == "explicit example" else "generated")
    return None, ""


# --------------------------------------------------------------------------- one mutant, end to end

@dataclass
class MutantResult:
    id: str
    target: str
    area: str
    description: str
    equivalent: Optional[str]
    witness: Optional[dict]
    witness_tried: int
    checks: dict  # check name -> CheckResult as dict
    seconds: float
    error: Optional[str] = None

    @property
    def killed_by(self) -> list[str]:
        return [name for name, c in self.checks.items() if c["status"] == "killed"]

    @property
    def verdict(self) -> str:
        """killed | survived | equivalent | no-witness | broken"""
        if self.error:
            return "broken"
        if self.equivalent:
            # A declared-equivalent mutant that changes an output is a catalogue bug.
            return "equivalent" if self.witness is None else "broken"
        if self.witness is None:
            return "no-witness"
        if self.killed_by:
            return "killed"
        if any(c["status"] in ("broken", "timeout") for c in self.checks.values()):
            return "broken"
        return "survived"


def worker_main(argv: list[str]) -> int:
    """``python -m remap_ab.mutants worker ID ROOT OUT [--full] [--no-sweep] [--no-props]``:
    one mutant end to end in its own process (an out-of-bounds access in a mutant must
    not take the whole run down): witness search, sweep subset, then the property
    suite through ``pytest.main``. Writes JSON to OUT after each phase."""
    mutant_id, root, out = argv[0], Path(argv[1]), Path(argv[2])
    full, do_sweep, do_props = "--full" in argv, "--no-sweep" not in argv, "--no-props" not in argv
    sys.path.insert(0, str(root))
    from remap_ab import backend

    backend.select("cpu")
    m = get(mutant_id)
    result: dict = {"phase": "witness"}

    def save(phase):
        result["phase"] = phase
        out.write_text(json.dumps(result))

    t0 = time.perf_counter()
    w, tried = find_witness(m)
    result.update(witness=asdict(w) if w else None, witness_tried=tried, witness_seconds=time.perf_counter() - t0)
    save("sweep")
    if m.equivalent:
        save("done")
        return 0
    if do_sweep:
        result["sweep"] = asdict(run_sweep(m, full=full))
    save("properties")
    if do_props and property_files():
        import pytest

        probe = Path(root) / f"{m.id}.probe.jsonl"
        probe.unlink(missing_ok=True)
        os.environ.update(REMAP_AB_PROFILE="ci", REMAP_AB_A=m.sides[0], REMAP_AB_B=m.sides[1],
                          REMAP_AB_MUTANT_PROBE=str(probe))
        if not full:
            os.environ["REMAP_AB_MUTANT_NO_SHRINK"] = "1"
        t1 = time.perf_counter()
        sys.stdout.flush()
        rc = int(pytest.main(_pytest_args(m, full)))
        result.update(props_rc=rc, props_seconds=time.perf_counter() - t1)
    save("done")
    return 0


def run_mutant(m: Mutant, root: Path, *, full: bool = False, props: bool = True, sweep: bool = True,
               timeout: float = 600.0) -> MutantResult:
    """Generate the mutant and run its worker process; collect the results."""
    start = time.perf_counter()
    res = MutantResult(m.id, m.target, m.area, m.description, m.equivalent, None, 0, {}, 0.0)
    try:
        materialize(m, root)
    except MutantError as exc:
        res.error = str(exc)
        return res
    out = Path(root) / f"{m.id}.worker.json"
    probe = Path(root) / f"{m.id}.probe.jsonl"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "remap_ab.mutants", "worker", m.id, str(root), str(out)]
    cmd += (["--full"] if full else []) + ([] if sweep else ["--no-sweep"]) + ([] if props else ["--no-props"])
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=_child_env(root), capture_output=True, text=True,
                              timeout=timeout)
        rc, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc = None
        output = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    elapsed = time.perf_counter() - t0
    data = json.loads(out.read_text()) if out.exists() else {"phase": "start"}
    res.witness, res.witness_tried = data.get("witness"), data.get("witness_tried", 0)
    if "sweep" in data:
        res.checks["sweep"] = data["sweep"]
    phase = data["phase"]
    tail = " ".join(output.strip().splitlines()[-3:])[:300]
    if phase == "done":
        if "props_rc" in data:
            c = summarize_probe(probe, data["props_rc"], output)
            c.seconds = data["props_seconds"]
            res.checks["properties"] = asdict(c)
        elif props and not m.equivalent:
            res.checks["properties"] = asdict(CheckResult("properties", "n/a", detail="no tests/test_properties_*.py"))
    elif phase == "properties" and (rc is None or rc < 0):
        if rc is None:
            c = CheckResult("properties", "timeout", detail=f"no verdict within the {timeout:.0f} s budget")
        else:
            c = summarize_probe(probe, rc, output)  # a crash inside the suite: a kill
        c.seconds = elapsed - data.get("witness_seconds", 0.0) - (data.get("sweep") or {}).get("seconds", 0.0)
        res.checks["properties"] = asdict(c)
    else:
        why = "timeout" if rc is None else (f"signal {-rc}" if rc < 0 else f"exit {rc}")
        res.error = f"worker stopped in its {phase} phase ({why}, {elapsed:.0f} s): {tail}"
    res.seconds = time.perf_counter() - start
    return res


def run_all(mutants: list[Mutant], *, jobs: int = 1, full: bool = False, props: bool = True,
            sweep: bool = True, timeout: float = 600.0, keep: Optional[Path] = None, progress=None) -> list[MutantResult]:
    """Every mutant, ``jobs`` at a time (each in its own process); results in catalogue order."""
    from concurrent.futures import ThreadPoolExecutor

    # Fail fast, before any process starts, if an edit no longer applies.
    for m in mutants:
        mutated_source(m)
    root = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="remap-ab-mutants-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        def one(m):
            r = run_mutant(m, root, full=full, props=props, sweep=sweep, timeout=timeout)
            if progress:
                progress(r)
            return r

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(one, mutants))
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        sys.exit(worker_main(sys.argv[2:]))
    print("usage: python -m remap_ab.mutants worker ID ROOT OUT [--full] [--no-sweep] [--no-props]", file=sys.stderr)
    sys.exit(2)
