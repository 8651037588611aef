"""Each performance tweak (remap_ab/tuning.py) against the job it speeds, side by side.

    python -m remap_ab.bench.tweaks --device cuda            # the H200 sweep, in-process (-j 0)
    python -m remap_ab.bench.tweaks --device cpu --max-tokens 3

Every variant is the whole sweep as a user starts it (a fresh ``remap-ab sweep``
process, its wall time from start to exit): all tweaks on, then each tweak off alone
(``REMAP_AB_TWEAKS_OFF``), then all off. The variants alternate within each repeat, the
order rotated from one repeat to the next, so a machine that slows down or speeds up
over the run weighs on every variant alike. On CUDA each variant has a Triton cache of
its own, filled by one uncounted run first: the sweep measured is the warm-cache one,
and a tweak that changes what the cache holds (``store_binary_only``) is read back
from a cache it wrote. On the CPU one uncounted run warms the files the processes read.

A tweak saves ``(off - on) / off`` of the job, medians of the repeats; the rule: kept
only if it saves at least 10 %.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from remap_ab.tuning import OFF_VARIABLE, TWEAKS

# The tweaks each device's sweep can feel (tuning.apply: the others are not applied there).
DEVICE_TWEAKS = {"cpu": ("heap", "hash_threads"), "cuda": TWEAKS}
KEEP_IF_SAVES = 0.10


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m remap_ab.bench.tweaks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cpu", "cuda"), required=True)
    p.add_argument("--repeats", type=int, default=3, help="counted runs of each variant (default 3)")
    p.add_argument("--max-tokens", type=int, default=None, help="the sweep's --max-tokens (default: the whole grid)")
    p.add_argument("-j", "--workers", type=int, default=None,
                   help="the sweep's -j (default 0 on cuda: in-process; the sweep's own default on cpu)")
    p.add_argument("--tweaks", default=None, help=f"comma-separated subset to switch off one by one "
                                                  f"(default: the device's, cpu {','.join(DEVICE_TWEAKS['cpu'])})")
    p.add_argument("--filter", action="append", default=[], metavar="NAME=V[,V...]",
                   help="the sweep's --filter (repeatable; default: none)")
    p.add_argument("--root", default=None, help="where the runs and Triton caches go (default: a temporary folder)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write every timing here")
    return p


def variants(device: str, tweaks: list[str]) -> list[tuple[str, str]]:
    """(label, value of REMAP_AB_TWEAKS_OFF) for each variant run."""
    return [("all on", "")] + [(f"{t} off", t) for t in tweaks] + [("all off", ",".join(tweaks))]


def run_sweep(device: str, off: str, root: Path, run: str, max_tokens, workers, cache: Path,
              filters: tuple = ()) -> float:
    """One ``remap-ab sweep`` in a fresh process; its wall seconds. A sweep that does not
    pass every case is no timing of the job: it stops the benchmark."""
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[2])  # this checkout's remap_ab, not another installed one
    env["PYTHONPATH"] = os.pathsep.join([here] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env[OFF_VARIABLE] = off
    env["TRITON_CACHE_DIR"] = str(cache)
    argv = [sys.executable, "-m", "remap_ab", "sweep", "--device", device, "--root", str(root), "--run", run,
            "--no-progress"]
    if max_tokens is not None:
        argv += ["--max-tokens", str(max_tokens)]
    if workers is not None:
        argv += ["-j", str(workers)]
    for f in filters:
        argv += ["--filter", f]
    start = time.perf_counter()
    r = subprocess.run(argv, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"tweaks bench: `{' '.join(argv)}` with {OFF_VARIABLE}={off!r} exited {r.returncode}:\n"
                         f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return seconds


def table(device: str, times: dict[str, list[float]], tweaks: list[str]) -> list[str]:
    on = statistics.median(times["all on"])
    lines = [f"{'variant':<24} {'median s':>9} {'min s':>8} {'runs':<30} {'saves':>7}  verdict (keep if it saves >= "
             f"{KEEP_IF_SAVES:.0%})"]
    for label, runs in times.items():
        med = statistics.median(runs)
        cells = f"{label:<24} {med:>9.2f} {min(runs):>8.2f} {' '.join(f'{s:.2f}' for s in runs):<30}"
        if label == "all on":
            lines.append(cells)
            continue
        saves = (med - on) / med
        verdict = ""
        if label != "all off":
            verdict = "keep" if saves >= KEEP_IF_SAVES else "drop"
        lines.append(f"{cells} {saves:>7.1%}  {verdict}")
    return lines


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    device = args.device
    workers = args.workers if args.workers is not None else (0 if device == "cuda" else None)
    tweaks = [t for t in (args.tweaks.split(",") if args.tweaks else DEVICE_TWEAKS[device]) if t]
    unknown = [t for t in tweaks if t not in TWEAKS]
    if unknown or args.repeats < 1:
        print(f"tweaks bench: error: {'unknown tweak ' + ', '.join(unknown) if unknown else '--repeats must be >= 1'}; "
              f"tweaks are {', '.join(TWEAKS)}", file=sys.stderr)
        return 2
    root = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="remap-ab-tweaks-"))
    runs = variants(device, tweaks)
    caches = {label: root / "triton-cache" / label.replace(" ", "-") for label, _ in runs}
    print(f"tweaks bench on {device}: sweep -j {workers if workers is not None else 'default'}"
          f"{f' --max-tokens {args.max_tokens}' if args.max_tokens is not None else ''}"
          f"{''.join(f' --filter {f}' for f in args.filter)}, {args.repeats} repeats, "
          f"variants alternating; wall seconds of each fresh sweep process; runs under {root}", flush=True)
    warm = runs if device == "cuda" else runs[:1]
    for label, off in warm:
        s = run_sweep(device, off, root, f"warm-{label.replace(' ', '-')}", args.max_tokens, workers, caches[label],
                      args.filter)
        print(f"  warm-up {label}: {s:.2f} s (not counted)", flush=True)
    times: dict[str, list[float]] = {label: [] for label, _ in runs}
    for r in range(args.repeats):
        order = runs[r % len(runs):] + runs[: r % len(runs)]
        for label, off in order:
            s = run_sweep(device, off, root, f"r{r}-{label.replace(' ', '-')}", args.max_tokens, workers,
                          caches[label], args.filter)
            times[label].append(s)
            print(f"  repeat {r + 1} {label}: {s:.2f} s", flush=True)
    print()
    for line in table(device, times, tweaks):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "workers": workers, "max_tokens": args.max_tokens,
                                               "repeats": args.repeats, "seconds": times}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
