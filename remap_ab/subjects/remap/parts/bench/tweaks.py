"""Each performance tweak (remap_ab/host/tuning.py) against the job it speeds, side by side.

    python -m remap_ab.subjects.remap.parts.bench.tweaks --device cuda            # the H200 sweep, in-process (-j 0)
    python -m remap_ab.subjects.remap.parts.bench.tweaks --device cpu --max-tokens 3

Every variant is the whole sweep as a user starts it (a fresh ``remap-ab sweep``
process, its wall time from start to exit): all tweaks on, then each tweak off alone
(``REMAP_AB_TWEAKS_OFF``), then all off. The variants alternate within each repeat, the
order rotated from one repeat to the next, so a machine that slows down or speeds up
over the run weighs on every variant alike. An uncounted run first fills Triton's cache:
the sweep measured is the warm-cache one. (The interpreter has no cache: on the CPU
that run only warms the files the processes read.)

Each run is timed twice: the fresh process from start to exit, and the sweep inside it
(its run.json ``wall_seconds``). A tweak saves ``(off - on) / off`` of the job, each run
against the all-on run of its repeat, the median of the repeats; the rule: kept only if
it saves at least 10 % of either.
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

from remap_ab.host.tuning import OFF_VARIABLE, TWEAKS

# The tweaks each device's sweep can feel (tuning.apply: heap only on the CPU, triton_key only on CUDA).
DEVICE_TWEAKS = {"cpu": ("heap", "hash_threads"), "cuda": ("triton_key", "hash_threads")}
KEEP_IF_SAVES = 0.10


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m remap_ab.subjects.remap.parts.bench.tweaks", description=__doc__,
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
    both = [("all off", ",".join(tweaks))] if len(tweaks) > 1 else []
    return [("all on", "")] + [(f"{t} off", t) for t in tweaks] + both


def run_sweep(device: str, off: str, root: Path, run: str, max_tokens, workers, cache: Path,
              filters: tuple = ()) -> tuple[float, float]:
    """One ``remap-ab sweep`` in a fresh process: its wall seconds from start to exit, and
    the sweep's own (``wall_seconds`` in its run.json: without the start-up). A sweep
    that does not pass every case is no timing of the job: it stops the benchmark."""
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[5])  # this checkout's remap_ab, not another installed one
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
    sweep = json.loads((root / run / "run.json").read_text())["wall_seconds"]
    return seconds, float(sweep)


def table(times: dict[str, dict[str, list[float]]]) -> list[str]:
    """Medians (and each run) of every variant; what switching a tweak off costs, as a
    share of the time with it off, ``(off - on) / off``, paired with the "all on" run of
    the same repeat (neighbours in time: a load that drifts over the benchmark cancels)
    and the median of the repeats taken."""
    on = times["all on"]
    lines = [f"{'variant':<22} {'process s':>9} {'sweep s':>8} {'saves (paired)':>17}  {'verdict':<7} "
             f"runs (process/sweep s)",
             f"{'':<22} {'median':>9} {'median':>8} {'process / sweep':>17}  {'>=' + format(KEEP_IF_SAVES, '.0%'):<7}"]
    for label, runs in times.items():
        med = {k: statistics.median(v) for k, v in runs.items()}
        each = " ".join(f"{p:.2f}/{s:.2f}" for p, s in zip(runs["process"], runs["sweep"]))
        saves, verdict = "", ""
        if label != "all on":
            cut = {k: statistics.median((off - with_on) / off for off, with_on in zip(runs[k], on[k])) for k in runs}
            saves = f"{cut['process']:.1%} / {cut['sweep']:.1%}"
            if label != "all off":
                verdict = "keep" if max(cut.values()) >= KEEP_IF_SAVES else "drop"
        lines.append(f"{label:<22} {med['process']:>9.2f} {med['sweep']:>8.2f} {saves:>17}  {verdict:<7} {each}")
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
    print(f"tweaks bench on {device}: sweep -j {workers if workers is not None else '(its default)'}"
          f"{f' --max-tokens {args.max_tokens}' if args.max_tokens is not None else ''}"
          f"{''.join(f' --filter {f}' for f in args.filter)}, {args.repeats} repeats, variants alternating; "
          f"process = a fresh sweep process start to exit, sweep = its run.json wall_seconds; runs under {root}",
          flush=True)
    cache = root / "triton-cache"
    p, s = run_sweep(device, "", root, "warm-up", args.max_tokens, workers, cache, args.filter)
    print(f"  warm-up: {p:.2f} s ({s:.2f} s sweep; not counted)", flush=True)
    times: dict[str, dict[str, list[float]]] = {label: {"process": [], "sweep": []} for label, _ in runs}
    for r in range(args.repeats):
        order = runs[r % len(runs):] + runs[: r % len(runs)]
        for label, off in order:
            p, s = run_sweep(device, off, root, f"r{r}-{label.replace(' ', '-')}", args.max_tokens, workers,
                             cache, args.filter)
            times[label]["process"].append(p)
            times[label]["sweep"].append(s)
            print(f"  repeat {r + 1} {label}: {p:.2f} s ({s:.2f} s sweep)", flush=True)
    print()
    for line in table(times):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "workers": workers, "max_tokens": args.max_tokens,
                                               "filters": args.filter, "repeats": args.repeats, "seconds": times},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
