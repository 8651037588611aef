"""Witnesses: showing, by running it, that a mutant changes an output of the real kernel.

A mutant nobody can tell from the real kernel tests nothing, so a kill only counts
for a mutant with a witness: a case on which its output differs from the unmutated
kernel's, measured here on the device the kernels run on. Where the real kernel's own
output is racy by contract (a tiled compaction: the order of the tile segments), a
bitwise difference proves nothing; there the mutant's output must break the contract
(judged against the oracle) to count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from remap_ab import command_line, runtime
from remap_ab.errors import MutantError
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.judge.call import call
from remap_ab.subjects.remap.judge.compare import compare
from remap_ab.subjects.remap.judge.nondet import gpu_runs
from remap_ab.subjects.remap.judge.rejections import by_id, judged
from remap_ab.subjects.remap.judge.runner import reference, run_implementation
from remap_ab.subjects.remap.parts.mutants.catalogue import Mutant
from remap_ab.subjects.remap.parts.mutants.checks import side_stream_load
from remap_ab.subjects.remap.parts.mutants.subset import RACE_RUNS, race_cases, sweep_subset


@dataclass
class Witness:
    """Where a mutant's output first differs from the real kernel's, on one case."""

    case_id: str
    config: dict
    kind: str  # "out", "counts", "error", "shape", or the contract check that failed
    row: int = -1
    col: int = -1
    original: object = None
    mutant: object = None
    lanes: int = 0
    source: str = "declared"  # the "declared" witness, a "race" case, or the "sweep" subset
    run: str = ""  # which repeated run showed it (racy mutants on a GPU), else ""
    rejection: str = ""  # kind "rejects": the rejection call (rejections.toml id) the mutant handles otherwise

    def line(self) -> str:
        if self.kind == "rejects":
            return (f"rejection call {self.rejection} ({command_line.line('run', '--rejection', self.rejection)}): original "
                    f"{self.original}, mutant {self.mutant}")
        cfg = CaseConfig(**self.config)
        where = f"row {self.row}" + (f", col {self.col}" if self.col >= 0 else "")
        if self.kind == "error":
            what = f"original returns, mutant raises {self.mutant}"
        elif self.kind == "shape":
            what = f"original returns {self.original}, mutant returns {self.mutant}"
        else:
            what = f"{self.kind} at {where}: original {self.original}, mutant {self.mutant} ({self.lanes} differ)"
        run = f" [run {self.run}]" if self.run else ""
        return f"case {self.case_id} ({command_line.line('run', case=cfg.cli_args())}){run}: {what}"


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


def _repeated_runs(m: Mutant, device: str):
    """For a racy mutant on a GPU: (label, context) of repeated runs on a quiet device
    and under a contending side stream. Else None: one plain run."""
    if not (m.needs_gpu and device == "cuda"):
        return None
    n = RACE_RUNS["cuda"]
    runs = gpu_runs("quiet", n) + gpu_runs("contended", n, side_stream_load())
    return [(r.label, r.context) for r in runs]


def _run_under(impl, config: CaseConfig, inputs, context):
    """One call of ``impl`` inside ``context`` (a side-stream load), as ``nondet``
    makes it: no device synchronisation before the launch, which would drain the
    contending stream first."""

    return call(impl, config, inputs, context=context, settle=False)


def compare_to_original(m: Mutant, config: CaseConfig, source: str = "declared", device: Optional[str] = None):
    """Run the real kernel and the mutant (already importable) on one case, on the
    device the kernels run on, both with uninitialised memory poisoned; return a
    Witness where their outputs differ, else None."""

    device = device or runtime.current()
    inputs = generate_inputs(config, device=device)
    orig = run_implementation(registry.get(m.original), config, inputs)
    if orig.error is not None:
        raise MutantError(f"the real {m.original} kernel raised on witness case {config.case_id}: {orig.error}")
    # A tiled compaction's segment order is a race in the real kernel itself: there the
    # mutant must break the contract, not merely differ.
    racy_order = config.compacts and not orig.contract.ordered
    ref = reference(config, inputs) if racy_order else None
    mutant_impl = registry.get(m.package)

    def make(kind, row=-1, col=-1, o=None, mu=None, lanes=0, run=""):
        return Witness(config.case_id, config.to_dict(), kind, row, col, o, mu, lanes, source, run)

    repeated = _repeated_runs(m, device)
    for label, context in repeated or [("", None)]:
        if context is None:
            mut = run_implementation(mutant_impl, config, inputs)
        else:
            mut = _run_under(mutant_impl, config, inputs, context)
        if mut.error is not None:
            return make("error", mu=mut.error[:160], run=label)
        if racy_order:
            assert ref is not None  # computed above for a racy order
            verdict = compare(config.case_id, mut, mut, ref, compacted=True, counts_returned=config.counts_returned)
            if not verdict.passed:
                f = verdict.first
                assert f is not None  # a verdict that did not pass names its first mismatch
                o = f.values.get("oracle") if isinstance(f.values, dict) else None
                return make(str(f.check), f.row, f.col, o, f.values.get(mut.name) if isinstance(f.values, dict) else None,
                            f.lanes, label)
            diffs = [("counts", orig.counts, mut.counts)]
        else:
            diffs = [("out", orig.out, mut.out), ("counts", orig.counts, mut.counts)]
        for kind, a, b in diffs:
            d = _first_diff(a, b)
            if d is not None:
                return make(d[0] or kind, d[1], d[2], d[3], d[4], d[5], label)
    return None


def rejection_witness(m: Mutant, device: str) -> Optional[Witness]:
    """A mutant of observable "rejection": its declared call, which the real kernel
    rejects and the mutant must accept (or reject with another exception type)."""

    name = m.witness_rejection
    assert name is not None  # observable "rejection" has a rejection witness (catalogue.py)
    case = by_id(name)
    _, orig, mut = judged(case, registry.get(m.original), registry.get(m.package), device)
    if not orig.rejected:
        raise MutantError(f"the real {m.original} kernel accepts witness call {name}; pick a call it rejects")
    if mut.rejected and orig.raised in mut.bases:
        return None
    return Witness(case.case_id, case.base.to_dict(), "rejects", original=orig.said().replace(orig.name + " ", "", 1),
                   mutant=mut.said().replace(mut.name + " ", "", 1), rejection=name)


def find_witness(m: Mutant, device: Optional[str] = None, declared_only: bool = False) -> tuple[Optional[Witness], int]:
    """The declared witness case first, then (unless ``declared_only``) the sweep
    subset: (witness or None, cases tried). A mutant of observable "rejection": its
    declared rejection call only."""

    device = device or runtime.current()
    if m.observable == "rejection":
        return rejection_witness(m, device), 1
    corpus = [(m.witness_config(), "declared")]
    if not declared_only:
        if m.needs_gpu and device == "cuda":
            # Many rows and tiles at once: where a race has its best chance.
            corpus += [(c, "race") for c in race_cases(m, device)[1:]]
        corpus += [(c.config, "sweep") for c in sweep_subset()]
    for tried, (config, source) in enumerate(corpus, 1):
        w = compare_to_original(m, config, source, device)
        if w is not None:
            return w, tried
    return None, len(corpus)
