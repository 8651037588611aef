"""Write the callers grid's pairwise cases: the fewest calls (a greedy pairwise cover,
envelope.greedy_cover) that, beside the grid's other cases, hold every declared pair and
combination of the call envelope (remap_ab/subjects/remap/envelope.toml).

    python scripts/pairwise_cases.py          # rewrite the two marked blocks of callers.toml
    python scripts/pairwise_cases.py --check  # exit 1 if they are not what it would write

The cases are the grid's `call` values between the markers, each combined only with the
`batch` value "pairwise" (which sets nothing: the call sets its own rows). Rows at the
prefill scales take a narrow index (K 128 or 256) so the CPU runs them in about a second.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

from remap_ab.subjects.remap.case.config import CaseConfig, caller_width
from remap_ab.subjects.remap.grid import envelope
from remap_ab.subjects.remap.grid import grid as gridmod

GRID = Path(__file__).resolve().parents[1] / "remap_ab" / "subjects" / "remap" / "grid" / "grids" / "callers.toml"
CALLS = ("    # pairwise cases (scripts/pairwise_cases.py writes them)\n", "    # end of the pairwise cases\n")
BATCH = ("    # the pairwise cases' batch (scripts/pairwise_cases.py)\n", "    # end of the pairwise batch\n")
BATCH_LABEL = "pairwise"
BLOCK_SIZES = (64, 32, 16, 4, 128, 256)


def _split(text: str, markers: tuple) -> tuple[str, str, str]:
    start, end = markers
    if start not in text or end not in text:
        sys.exit(f"{GRID}: the markers {start.strip()!r} ... {end.strip()!r} are missing")
    head, rest = text.split(start, 1)
    body, tail = rest.split(end, 1)
    return head, body, tail


def _without_pairwise(text: str) -> str:
    for markers in (CALLS, BATCH):
        head, _, tail = _split(text, markers)
        text = head + markers[0] + markers[1] + tail
    return text


def _topk(tokens: int) -> int:
    return 2048 if tokens <= 64 else 512 if tokens <= 1024 else 256 if tokens <= 4096 else 128


def case_fields(values: dict, i: int, env: envelope.Envelope) -> dict:
    """CaseConfig fields of a case holding ``values`` (a value per dimension); ``i``
    rotates what the dimensions leave free (block size, rank, the row count in its class)."""
    rows = next(r for r in env.row_classes if r.label == values["rows"])
    sizes = rows.sizes()
    tokens = sizes[i % len(sizes)]
    f: dict = dict(mode=values["wrapper"], tokens=tokens, topk=_topk(tokens), block_n=128, backend="none",
                   counts=values["counts"] == "on", num_reqs=min(4, tokens), tokens_per_req=0)
    stride = values["BLOCK_STRIDE_ROWS"]
    if stride == "non-dense":
        packed = [s for s in env.strides if s.block_stride != s.block_size]
        s = packed[i % len(packed)]
        f.update(block_size=s.block_size, block_stride=s.block_stride)
    else:
        size = BLOCK_SIZES[i % len(BLOCK_SIZES)]
        f.update(block_size=size, block_stride=size if stride == "dense" else 0)
    f["blocks_per_req"] = caller_width(4000, f["block_size"])
    if values["wrapper"] == "dcp":
        size = int(values["dcp_size"])
        f.update(dcp_size=size, dcp_rank=(i * 3) % size, interleave=1, compact=values["compaction"] == "on")
    f["out_buffers"] = values["out"] == "passed"
    f["counts_out"] = values["valid_counts_out"] == "passed"
    if values["zero_rows"] == "forced":
        if tokens >= 3:
            f.update(row_layout="mixed", invalid_ratio=0.3)
        elif tokens == 2:
            f.update(graph_padding=1, row_layout="tail_padded", invalid_ratio=0.3)
        else:
            f.update(row_layout="uniform", invalid_ratio=1.0)
    else:
        f.update(row_layout=("tail_padded", "uniform")[i % 2], invalid_ratio=0.3)
    f["out_of_range"] = 0.0
    return f


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return repr(v)


def pairwise_text(text: str) -> str:
    """``text`` (callers.toml) with its pairwise blocks written anew."""
    env = envelope.load()
    base = gridmod.parse(tomllib.loads(_without_pairwise(text)), str(GRID))
    base.cover = ()  # the points [envelope] adds depend on the others: count only the grid's own
    own = [p.config for p in base.points()]
    chosen = envelope.greedy_cover((env.classify(c) for c in own), env)
    lines, labels = [], []
    for i, values in enumerate(chosen):
        fields = case_fields(values, i, env)
        config = CaseConfig.from_dict(fields)
        got = env.classify(config)
        if got != values:
            wrong = {k: (v, got[k]) for k, v in values.items() if got[k] != v}
            sys.exit(f"pairwise case {i}: the fields made do not hold the values chosen: {wrong}")
        defaults = {"table": "persistent", "layout": "persistent", "negatives": "minus_one", "seed": 0}
        kept = {k: v for k, v in fields.items() if k not in defaults}
        label = (f"pairs-{i:02d}-{values['wrapper']}" + (f"{values['dcp_size']}" if values["wrapper"] == "dcp" else "")
                 + f"-t{config.tokens}")
        labels.append(label)
        body = ", ".join(f"{k} = {_toml_value(v)}" for k, v in kept.items())
        lines.append(f'    {{ label = "{label}", {body}, only = {{ batch = ["{BATCH_LABEL}"] }} }},\n')
    head, _, tail = _split(text, CALLS)
    text = head + CALLS[0] + "".join(lines) + CALLS[1] + tail
    head, _, tail = _split(text, BATCH)
    batch = f'    {{ label = "{BATCH_LABEL}", only = {{ call = [{", ".join(chr(34) + x + chr(34) for x in labels)}] }} }},\n'
    return head + BATCH[0] + batch + BATCH[1] + tail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the blocks are not what would be written")
    args = parser.parse_args()
    text = GRID.read_text(encoding="utf-8")
    new = pairwise_text(text)
    if args.check:
        if new != text:
            print(f"{GRID}: its pairwise cases are not the greedy cover's; run python scripts/pairwise_cases.py")
            return 1
        return 0
    GRID.write_text(new, encoding="utf-8")
    print(f"wrote {GRID}: {new.count('only = { batch = [')} pairwise cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
