"""Wall time of run_case with and without --memcheck on the CPU, over the default CPU
sweep's cases selected by --filter (default tokens=1), every --every-th of them.

    python3 scripts/memcheck_cost.py --filter tokens=1 --every 4
Each case runs once without memcheck, then once with it (same process, warm)."""

import argparse
import time

from remap_ab import backend

backend.select("cpu")

from remap_ab import grid  # noqa: E402
from remap_ab.runner import run_case  # noqa: E402
from remap_ab.sweep import default_max_tokens, select  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--filter", action="append", default=None)
    p.add_argument("--every", type=int, default=1)
    args = p.parse_args()
    points = select(grid.load(), args.filter or ["tokens=1"], default_max_tokens("cpu"))[:: args.every]
    plain = checked = 0.0
    failed = []
    run_case(points[0].config, memcheck=True)  # warm the interpreter's rewrites
    for p_ in points:
        t = time.perf_counter()
        r0 = run_case(p_.config)
        plain += time.perf_counter() - t
        t = time.perf_counter()
        r1 = run_case(p_.config, memcheck=True)
        checked += time.perf_counter() - t
        if not r1.verdict.passed or not r0.verdict.passed:
            failed.append((p_.case_id, r1.verdict.summary()))
    n = len(points)
    print(f"{n} cases: without memcheck {plain:.1f} s, with {checked:.1f} s "
          f"(x{checked / plain:.2f}, +{(checked - plain) / n * 1e3:.0f} ms per case); not passing: {len(failed)}")
    for f in failed[:10]:
        print("  ", *f)


if __name__ == "__main__":
    main()
