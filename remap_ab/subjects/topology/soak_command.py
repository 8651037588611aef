"""The topology's part of ``remap-ab soak`` (``commands/soak.py`` composes it): its
paragraph of the command's --help and its size options, whose values reach its soak
(soak.py) as ``SoakSettings.options`` by their names: ``max_size`` (the shared size cap,
``options.MAX_SIZE``: the most rows) and ``max_topk`` (the largest topk)."""

from __future__ import annotations

from remap_ab import options
from remap_ab.options import positive_int
from remap_ab.subjects.topology.config import MAX_SEGMENTS, TOPK_DOMAIN
from remap_ab.subjects.topology.soak import CPU_MAX_ROWS, CPU_WIDE_ROWS, GPU_MAX_ROWS, WIDE_TOPK

DESCRIPTION = f"""\
The topology-witness merge (--subject topology; docs/soak-bench-resources.md): every
draw is new: rows up to the prefill sizes on a GPU, capped on the CPU at {CPU_MAX_ROWS}
({CPU_WIDE_ROWS} at topk {WIDE_TOPK} and over; {options.MAX_SIZE.flag} sets the cap); topk from 1 to {max(TOPK_DOMAIN)}, the
model widths {' and '.join(map(str, TOPK_DOMAIN[1:]))} more often; S from 1 to {MAX_SEGMENTS}; every context-length class;
keep and budget at their edges; padding, duplicates and entries at or past L. One
worker on the CPU; --fresh-every is refused (every draw is fresh)."""


def add_arguments(p) -> None:
    """The size options, after --subject (their dests are the keys of SoakSettings.options)."""
    default = f"{GPU_MAX_ROWS} on GPU; {CPU_MAX_ROWS} on CPU, {CPU_WIDE_ROWS} at topk {WIDE_TOPK} and over"
    options.add(p, options.MAX_SIZE.but(help="the most rows a drawn case has (default {default})", default_text=default))
    p.add_argument("--max-topk", type=positive_int, default=None, metavar="N",
                   help=f"the largest topk drawn (default {max(TOPK_DOMAIN)})")
