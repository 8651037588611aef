"""Offline check: the batched interpreter against the sequential one on large cases.

Runs each chosen grid case through an implementation in both interpreter modes under
each schedule policy and compares outputs and counts byte for byte (poisoning on, as
in a sweep). Too slow for the test suite (a 1024-token launch of the old kernel at
K = 2048 is 16 384 sequential programs); tests/test_interp_batched.py is the small,
always-run version.

    python3 scripts/interp_equivalence.py [--quick]
    python3 scripts/interp_equivalence.py --default-sweep
    python3 scripts/interp_equivalence.py --grid-tokens 16,128

``--default-sweep`` instead runs every grid case with at most 3 token rows (576 cases:
the CPU default before the whole grid became it) through old and new in both modes,
case i under schedule policy i mod 5, so every policy meets every path and K.
``--grid-tokens`` does the same for the grid points with those token counts (288 each);
``--every N`` keeps every N-th of them (a sample spread over paths, K and ratios).

Prints one line per (case, implementation, policy) and a summary; exit 1 on any
difference.
"""

from __future__ import annotations

import sys
import time

from remap_ab import backend

backend.select("cpu")

# After backend.select on purpose: the interpreter is fixed when a kernel is imported
# (see remap_ab/backend.py), and these imports may bring kernels in.
import torch  # noqa: E402

from remap_ab import grid, registry, runner  # noqa: E402
from remap_ab import interp_batched as ib  # noqa: E402
from remap_ab.inputs import generate_inputs  # noqa: E402
from remap_ab.schedule import POLICIES, interpreter_schedule  # noqa: E402

# (grid filters, implementations, policies): K=384 is tiled in both kernels, so both
# race for compaction slots under every schedule; K=2048 with prefill is old's largest
# launch (16 384 programs) and new's single tile.
PLAN = [
    ({"tokens": "1024", "k": "384", "path": "dcp-compact-counts", "invalid": "0.3"}, ("old", "new"), POLICIES),
    ({"tokens": "1024", "k": "2048", "path": "convert-prefill-counts", "invalid": "0.3"}, ("new",), POLICIES),
    ({"tokens": "1024", "k": "2048", "path": "convert-prefill-counts", "invalid": "0.3"}, ("old",), ("row_major",)),
    ({"tokens": "512", "k": "512", "path": "dcp-inplace-counts", "invalid": "0.7"}, ("old", "new"), ("row_major", "tiles_reversed")),
]


def raw(t):
    return None if t is None else (t.dtype, tuple(t.shape), t.contiguous().view(torch.uint8).numpy().tobytes())


def grid_cases(tokens: list) -> int:
    g = grid.load()
    points = g.select(max_tokens=3) if not tokens else g.select({"tokens": tokens})
    every = int(sys.argv[sys.argv.index("--every") + 1]) if "--every" in sys.argv else 1
    points = points[::every]
    bad = total = 0
    cpu = {"sequential": 0.0, "batched": 0.0}
    for n, point in enumerate(points):
        config = point.config
        inputs = generate_inputs(config)
        policy = POLICIES[n % len(POLICIES)]
        for impl in ("old", "new"):
            outs = {}
            for mode in ("batched", "sequential"):
                start = time.process_time()
                with ib.using(mode):
                    outs[mode] = runner.run_implementation(
                        registry.get(impl), config, inputs, schedule=lambda policy=policy, n=n: interpreter_schedule(policy, n)
                    )
                cpu[mode] += time.process_time() - start
            a, b = outs["sequential"], outs["batched"]
            same = a.error == b.error and raw(a.out) == raw(b.out) and raw(a.counts) == raw(b.counts)
            total += 1
            if not same:
                bad += 1
                print(f"DIFFERENT: {point.line()} {impl} {policy}", flush=True)
        if n % 50 == 0:
            print(f"{n} cases, {bad} different", flush=True)
    what = f"grid points with tokens {','.join(tokens)}" if tokens else "grid points with tokens <= 3"
    what += f" (every {every}th)" if every > 1 else ""
    print(f"{what}: {total - bad}/{total} (case, implementation) runs identical; CPU seconds in kernels "
          f"sequential {cpu['sequential']:.1f}, batched {cpu['batched']:.1f}; {ib.stats}; fallbacks {ib.fallbacks}")
    return 1 if bad else 0


def main() -> int:
    if "--default-sweep" in sys.argv:
        return grid_cases([])
    if "--grid-tokens" in sys.argv:
        return grid_cases(sys.argv[sys.argv.index("--grid-tokens") + 1].split(","))
    quick = "--quick" in sys.argv
    g = grid.load()
    bad = total = 0
    cpu = {"sequential": 0.0, "batched": 0.0}
    for filters, impls, policies in PLAN:
        points = g.select({k: [v] for k, v in filters.items()}, max_tokens=1024)
        for point in points[:1]:
            config = point.config
            inputs = generate_inputs(config)
            for impl in impls:
                for policy in policies[:1] if quick else policies:
                    outs = {}
                    for mode in ("batched", "sequential"):
                        start = time.process_time()
                        with ib.using(mode):
                            outs[mode] = runner.run_implementation(
                                registry.get(impl), config, inputs, schedule=lambda policy=policy: interpreter_schedule(policy, 5)
                            )
                        cpu[mode] += time.process_time() - start
                    a, b = outs["sequential"], outs["batched"]
                    same = a.error == b.error and raw(a.out) == raw(b.out) and raw(a.counts) == raw(b.counts)
                    total += 1
                    bad += not same
                    print(f"{point.line()[:90]} {impl} {policy}: {'identical' if same else 'DIFFERENT'}", flush=True)
    print(
        f"{total - bad}/{total} identical; CPU seconds sequential {cpu['sequential']:.1f}, batched {cpu['batched']:.1f}; "
        f"{ib.stats}; fallbacks {ib.fallbacks}"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
