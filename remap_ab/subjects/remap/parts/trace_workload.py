"""What a trace of the remap's calls holds, in lines for the header of ``sweep --trace``:
the workload (calls, signatures, row counts, strides, caller buffers, DCP) and where it
meets the declared call envelope (envelope.py): the values it holds that no envelope
cell covers, and the envelope's cells none of its calls touch."""

from __future__ import annotations

from collections import Counter
from typing import Optional

from remap_ab.status import plural
from remap_ab.subjects.remap.grid import envelope as envelopemod


def _values(items) -> str:
    return ", ".join(str(v) for v in sorted(set(items))) or "none"


def workload_lines(folder: str, samples: list, configs: list, manifests: list) -> list[str]:
    """``samples`` (trace_file.Sample) and their ``configs``, one each; ``manifests``:
    the recording processes' call counts."""
    sigs = {s.signature for s in samples}
    counted = sum(int(e.get("calls", 0)) for m in manifests for e in m.get("signatures", []))
    calls = (f"{counted:,} calls counted by {plural(len(manifests), 'recording process')}" if manifests
             else "no call counts (no calls-*.json)")
    lines = [f"trace {folder}: {plural(len(samples), 'recorded call')} of {plural(len(sigs), 'signature')}; {calls}"]
    by_mode = Counter(c.mode for c in configs)
    lines.append("  wrappers: " + ", ".join(f"{m} {n}" for m, n in sorted(by_mode.items())))
    rows = [c.tokens for c in configs]
    lines.append(f"  rows (T): {_values(rows)}; K: {_values(c.topk for c in configs)}; "
                 f"BLOCK_N: {_values(c.block_n for c in configs)}; block sizes: {_values(c.block_size for c in configs)}; "
                 f"block-table widths: {_values(c.blocks_per_req for c in configs)}")
    strides = Counter(f"{c.block_stride}@{c.block_size}" for c in configs if c.block_stride)
    lines.append("  BLOCK_STRIDE_ROWS: " + (", ".join(f"{k} ({n})" for k, n in sorted(strides.items()))
                                            if strides else "not passed"))
    layouts: Counter[str] = Counter()
    for s in samples:
        for name, meta in sorted(s.strides.items()):
            shape, stride = meta["shape"], meta["stride"]
            dense = _dense(shape)
            if list(stride) != dense or meta.get("offset"):
                layouts[f"{name} {tuple(shape)} strides {tuple(stride)}" + (f" offset {meta['offset']}" if meta.get("offset") else "")] += 1
    lines.append("  input strides: " + ("; ".join(f"{k} ({n})" for k, n in sorted(layouts.items()))
                                        + " — replayed in the nearest shipped layout: "
                                        + _values(c.layout for c in configs)
                                        if layouts else "every input contiguous"))
    buffers: Counter[str] = Counter()
    for s in samples:
        for name, meta in sorted(s.buffers.items()):
            buffers[f"{name}= {tuple(meta['shape'])} strides {tuple(meta['stride'])}"] += 1
    lines.append("  caller buffers: " + ("; ".join(f"{k} ({n})" for k, n in sorted(buffers.items()))
                                         if buffers else "none"))
    dcp = Counter(f"size {c.dcp_size} rank {c.dcp_rank} interleave {c.interleave}"
                  + (", compacted" if c.compacts else ", in place") for c in configs if c.is_dcp)
    lines.append("  DCP: " + ("; ".join(f"{k} ({n})" for k, n in sorted(dcp.items())) if dcp else "none"))
    prefill = sum(1 for c in configs if c.has_prefill)
    counts = sum(1 for c in configs if c.counts)
    lines.append(f"  prefill workspace: {prefill} of {len(configs)}; valid counts returned: {counts} of {len(configs)}")
    return lines


def signature_words(config) -> str:
    """A recorded call's signature in words, from the case it makes."""
    words = [f"{config.mode} T={config.tokens} K={config.topk} BLOCK_N={config.block_n} B={config.block_size} "
             f"W={config.blocks_per_req} Rq={config.num_reqs}"]
    if config.block_stride:
        words.append(f"BLOCK_STRIDE_ROWS={config.block_stride}")
    if config.is_dcp:
        words.append(f"DCP {config.dcp_size} rank {config.dcp_rank} interleave {config.interleave}"
                     + (" compacted" if config.compacts else " in place"))
    if config.has_prefill:
        words.append("prefill workspace")
    if config.counts:
        words.append("counts")
    if config.out_buffers:
        words.append("caller buffers")
    if config.layout != "contiguous":
        words.append(f"{config.layout} inputs")
    return ", ".join(words)


def signature_lines(cases: list, manifests: list, show: int = 24) -> list[str]:
    """One line per signature: its calls counted, its samples, its words (``cases``:
    trace_case.TraceCase)."""
    counted: Counter[str] = Counter()
    for m in manifests:
        for e in m.get("signatures", []):
            counted[str(e.get("signature"))] += int(e.get("calls", 0))
    samples = Counter(c.signature for c in cases)
    first: dict = {}
    for c in cases:
        first.setdefault(c.signature, c.config)
    lines = ["  signatures (calls counted; recorded calls replayed):"]
    for sig in sorted(samples, key=lambda x: (-counted.get(x, 0), x))[:show]:
        lines.append(f"    {sig}  {counted.get(sig, 0):>7,}; {samples[sig]:>3}  {signature_words(first[sig])}")
    if len(samples) > show:
        lines.append(f"    and {len(samples) - show} more")
    return lines


def _dense(shape) -> list:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= max(1, n)
    return list(reversed(out))


def _outside(config, cells: list) -> list[str]:
    """The envelope values ``config`` holds that no cell of their kind covers."""
    kinds = {"rows": True, "blocks": True, "widths": True, "strides": bool(config.block_stride),
             "buffers": config.out_buffers, "dcp": config.is_dcp}
    out = []
    for kind, applies in kinds.items():
        if not applies:
            continue
        mine = [c for c in cells if c.kind == kind and c.wrapper == config.mode]
        if kind == "dcp":
            for part in ("dcp_size", "interleave"):
                group = [c for c in mine if dict(c.match).get(part) is not None]
                if not any(c.covers(config) for c in group):
                    out.append(f"{config.mode}:" + (f"dcp={config.dcp_size}r{config.dcp_rank}" if part == "dcp_size"
                                                    else f"interleave={config.interleave}"))
            continue
        if any(c.covers(config) for c in mine):
            continue
        label = {"rows": f"rows={config.tokens}", "blocks": f"block={config.block_size}", "widths": f"K={config.topk}",
                 "strides": f"stride={config.block_stride}@{config.block_size}",
                 "buffers": f"buffers=out{'+counts' if config.counts else ''}"}[kind]
        out.append(f"{config.mode}:{label}")
    return out


def envelope_lines(configs: list, envelope: Optional[envelopemod.Envelope] = None, show: int = 16) -> list[str]:
    """Where the trace's calls and the declared envelope differ, both ways."""
    env = envelope or envelopemod.load()
    cells = env.cells()
    outside = Counter(label for c in configs for label in _outside(c, cells))
    untouched = [cell.label for cell in cells if not any(cell.covers(c) for c in configs)]

    def listed(labels) -> str:
        labels = list(labels)
        more = f", and {len(labels) - show} more" if len(labels) > show else ""
        return ", ".join(labels[:show]) + more

    lines = []
    if outside:
        lines.append(f"  outside the declared envelope ({env.source}): {plural(len(outside), 'value')} the trace's calls "
                     f"hold that no envelope cell covers: "
                     + listed(f"{k} ({n})" for k, n in sorted(outside.items())))
    else:
        lines.append(f"  outside the declared envelope ({env.source}): nothing; every value the trace holds is a cell of it")
    lines.append(f"  envelope cells the trace does not touch: {len(untouched)} of {len(cells)}"
                 + (f": {listed(untouched)}" if untouched else ""))
    return lines
