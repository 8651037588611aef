"""Micro-bench of the topology-witness merge: the fused Triton kernel against the
torch pair, per (rows, topk), with S = 64, keep = topk / 2 and max_replacements = S
on the grid's "mixed" and "clustered" inputs. Each cell is first checked bit-exact
(fused == pair), then timed by ``triton.testing.do_bench`` (median of its repeats,
CUDA events, L2 flushed between calls).

    PYTHONPATH=$PWD python scripts/bench_topology.py                 # the H200 table
    PYTHONPATH=$PWD python scripts/bench_topology.py --device cpu --rows 2 --topk 64   # a smoke run (interpreter)

On the CPU the kernel runs in Triton's interpreter: the times say nothing about a GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--rows", type=int, action="append", help="rows R (repeatable; default 1 64 1024 4096 16384)")
    p.add_argument("--topk", type=int, action="append", help="topk (repeatable; default 2048 2176)")
    p.add_argument("--segments", type=int, default=64)
    args = p.parse_args(argv)
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before Triton is imported: the kernel runs on CPU tensors
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_topology: no CUDA device; run on a GPU, or pass --device cpu for a smoke run", file=sys.stderr)
        return 2
    from kernels_topology import fused, torch_pair
    from remap_ab.subjects.topology.config import TopologyCase
    from remap_ab.subjects.topology.inputs import generate

    def timed_us(fn) -> float:
        if args.device == "cuda":
            from triton.testing import do_bench

            return 1000.0 * do_bench(fn, warmup=25, rep=200, return_mode="median")
        fn()
        start = time.perf_counter()
        fn()
        return 1e6 * (time.perf_counter() - start)

    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "CPU (Triton interpreter)"
    print(f"# topology-witness merge, fused vs torch pair, S={args.segments}, keep=topk/2, max_replacements=S; {device_name}")
    print(f"{'rows':>6} {'topk':>5} {'learned':>9} {'pair us':>10} {'fused us':>10} {'pair/fused':>10}")
    with fused.kernel_forced():
        for rows in args.rows or (1, 64, 1024, 4096, 16384):
            for topk in args.topk or (2048, 2176):
                for learned in ("mixed", "clustered"):
                    case = TopologyCase(rows=rows, topk=topk, segments=args.segments, keep=topk // 2,
                                        max_replacements=args.segments, learned=learned, seed=1)
                    x = generate(case, args.device)
                    call_args = (x.learned, x.context_lens, case.segments, case.keep, case.max_replacements)
                    pair = torch_pair.fused_topology_witness_merge(*call_args)
                    if not torch.equal(fused.fused_topology_witness_merge(*call_args), pair):
                        print(f"{rows:>6} {topk:>5} {learned:>9}  MISMATCH: fused != pair; not timed "
                              f"(replay: {case.replay_command()})")
                        continue
                    t_pair = timed_us(lambda: torch_pair.fused_topology_witness_merge(*call_args))  # noqa: B023
                    t_fused = timed_us(lambda: fused.fused_topology_witness_merge(*call_args))  # noqa: B023
                    print(f"{rows:>6} {topk:>5} {learned:>9} {t_pair:>10.2f} {t_fused:>10.2f} {t_pair / t_fused:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
