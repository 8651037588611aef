"""The slot mapping's two versions timed as vLLM runs them (issue 58, part 6): the host
version on host arrays plus the copy of its result to the device (pinned buffer,
non_blocking, as a model runner copies it), against the device kernel on device tensors.
Each figure is the median of --iters calls after --warmup, every call ended by a
device synchronisation. Decode: R requests of one token; prefill: R requests of T tokens.
The host version's request rows are made once, outside the timing (a model runner has
them from its own input preparation); the device version's tensors are on the device.

    python scripts/slotmap_bench.py [--iters 200] [--warmup 20] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

from kernels_slotmap import adapter, device, host

SIZES = [("decode", r, 1) for r in (1, 16, 64, 256)] + [("prefill", r, t) for r, t in ((1, 2048), (4, 1024), (2, 8192), (1, 16384))]
SETTINGS = [(16, 1, 1), (16, 8, 16)]  # (block_size, DCP world size, interleave); rank 0


def batch(requests: int, tokens: int, block_size: int, world: int, rng) -> adapter.Batch:
    context = tokens + rng.integers(0, 4 * block_size * world, requests)
    columns = int(-(-context.max() // (block_size * world)))
    table = rng.integers(0, 1 << 20, (requests, columns)).astype(np.int32)
    positions = np.concatenate([np.arange(c - tokens, c) for c in context]).astype(np.int64)
    qsl = (np.arange(requests + 1) * tokens).astype(np.int32)
    return adapter.Batch(table, columns, qsl, positions, requests * tokens + 64)


def timed(fn, iters: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)


def measure(b: adapter.Batch, params: adapter.Params, iters: int, warmup: int) -> tuple[float, float]:
    """(host + copy, device) median microseconds; AssertionError if the two disagree."""
    n = len(b.positions)
    pinned = torch.zeros(b.max_num_tokens, dtype=torch.int64).pin_memory()
    target = torch.empty(b.max_num_tokens, dtype=torch.int64, device="cuda")
    hargs, hkw = adapter.host_args(b, params, pinned.numpy())  # the host version writes into the pinned buffer

    def run_host() -> None:
        host.compute_slot_mapping(*hargs, **hkw)
        target[:n].copy_(pinned[:n], non_blocking=True)

    out = torch.empty(b.max_num_tokens, dtype=torch.int64, device="cuda")
    dargs, dkw = adapter.device_args(b, params, out, "cuda")

    def run_device() -> None:
        device.compute_slot_mapping(*dargs, **dkw)

    h, d = timed(run_host, iters, warmup), timed(run_device, iters, warmup)
    assert torch.equal(target[:n], out[:n]), "the two versions disagree on the bench batch"
    return h, d


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    print(f"{torch.cuda.get_device_name()}; median of {args.iters} calls, microseconds")
    print(f"{'kind':8} {'reqs':>5} {'tokens':>6} {'bs':>4} {'W':>2} {'I':>3}  {'host+copy':>10} {'device':>8}  ratio")
    for block_size, world, interleave in SETTINGS:
        for kind, requests, tokens in SIZES:
            b = batch(requests, tokens, block_size, world, rng)
            h, d = measure(b, adapter.Params(block_size, world, 0, interleave), args.iters, args.warmup)
            rows.append({"kind": kind, "requests": requests, "tokens_per_request": tokens, "block_size": block_size,
                         "world": world, "interleave": interleave, "host_copy_us": round(h, 2), "device_us": round(d, 2)})
            print(f"{kind:8} {requests:5} {tokens:6} {block_size:4} {world:2} {interleave:3}  {h:10.1f} {d:8.1f}  {h / d:5.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "iters": args.iters, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
