"""Wall time of run_case with and without --memcheck on the CPU, over the default CPU
sweep's cases (tokens <= 3) selected by --filter, every --every-th of them.

    python3 scripts/memcheck_cost.py --filter tokens=1 --every 4
Each case runs once without memcheck, then once with it (same process, warm)."""

import argparse
import time

from remap_ab import backend

# The interpreter must be chosen before anything imports Triton, hence the late imports.
backend.select("cpu")

from remap_ab import grid  # noqa: E402
from remap_ab.runner import run_case  # noqa: E402
from remap_ab.sweep import default_max_tokens, select  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--filter", action="append", default=None)
    p.add_argument("--every", type=int, default=1)
    p.add_argument("--only-memcheck", action="store_true", help="run each case once, with memcheck (is everything clean?)")
    args = p.parse_args()
    points = select(grid.load(), args.filter or [], default_max_tokens("cpu"))[:: args.every]
    if args.only_memcheck:
        start, bad = time.perf_counter(), []
        for i, p_ in enumerate(points, 1):
            r = run_case(p_.config, memcheck=True)
            if not r.verdict.passed:
                bad.append(r.verdict.summary())
            if i % 50 == 0:
                print(f"{i}/{len(points)} cases, {time.perf_counter() - start:.0f} s, not passing {len(bad)}", flush=True)
        print(f"{len(points)} cases with memcheck in {time.perf_counter() - start:.0f} s; not passing: {len(bad)}")
        for line in bad[:10]:
            print("  ", line)
        return
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
