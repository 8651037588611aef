"""What recording costs a call (docs/traces.md): the host time per call of kernels_main's
convert unwrapped, wrapped but not sampled, and sampled; the wrapper's own cost around a
stub (no kernel); on a GPU, the GPU time a sampled call adds and that no call syncs the
host; and the disk a trace of 10,000 calls takes at the default sampling.

    python scripts/record_overhead.py                 # cuda when there is one
    python scripts/record_overhead.py --device cpu    # the Triton interpreter: few calls

The disk figure does not depend on the kernel (the recorder writes a call's inputs), so
it is measured around the stub, with the same inputs and sampling on every device.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from remap_ab import runtime  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    p.add_argument("--calls", type=int, default=None, help="timed calls per repeat (default 2000 on cuda, 20 on cpu)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--rows", type=int, default=16, help="T of the timed call (a decode step)")
    p.add_argument("--topk", type=int, default=2048)
    p.add_argument("--sampled", type=int, default=None, help="sampled calls timed one by one (default 200 / 10)")
    p.add_argument("--disk-calls", type=int, default=10_000)
    p.add_argument("--every", type=int, default=None, help="the sampling of the disk figure (default: the recorder's)")
    args = p.parse_args()
    device = runtime.select(args.device)
    import torch

    import kernels_main
    import remap_ab
    from remap_ab.traces import recorder

    cuda = device == "cuda"
    calls = args.calls or (2000 if cuda else 20)
    sampled_n = args.sampled or (200 if cuda else 10)
    every = args.every or recorder.DEFAULT_EVERY
    name = torch.cuda.get_device_name() if cuda else "CPU (Triton interpreter)"
    print(f"device: {name}; torch {torch.__version__}")

    def inputs(rows: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        table = torch.randint(0, 100_000, (64, 64), dtype=torch.int32, generator=g)
        ids = torch.randint(-1, 64 * 64, (rows, args.topk), dtype=torch.int32, generator=g)
        req = torch.randint(0, 64, (rows,), dtype=torch.int32, generator=g)
        return [t.to(device) for t in (req, table, ids)]

    req, table, ids = inputs(args.rows, 0)
    out = torch.empty_like(ids)
    counts = torch.empty(args.rows, dtype=torch.int32, device=device)
    kwargs = dict(BLOCK_SIZE=64, BLOCK_STRIDE_ROWS=4096, NUM_TOPK_TOKENS=args.topk, return_valid_counts=True,
                  out=out, valid_counts_out=counts)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def per_call(module, n: int) -> float:
        """Median over the repeats of (n calls + the final sync) / n, in µs."""
        f = module.triton_convert_req_index_to_global_index
        f(req, table, ids, **kwargs)
        sync()
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            for _ in range(n):
                module.triton_convert_req_index_to_global_index(req, table, ids, **kwargs)
            sync()
            times.append((time.perf_counter() - t0) / n * 1e6)
        return statistics.median(times)

    stub: Any = types.ModuleType("stub_kernels")

    def triton_convert_req_index_to_global_index(req_id, block_table, token_indices, BLOCK_SIZE=64,
                                                 BLOCK_STRIDE_ROWS=None, NUM_TOPK_TOKENS=2048, BLOCK_N=128,
                                                 HAS_PREFILL_WORKSPACE=False, prefill_workspace_request_ids=None,
                                                 prefill_workspace_starts=None, return_valid_counts=False, out=None,
                                                 valid_counts_out=None):
        return out, valid_counts_out

    stub.triton_convert_req_index_to_global_index = triton_convert_req_index_to_global_index
    with tempfile.TemporaryDirectory() as tmp:
        bare = per_call(stub, 20_000)
        with remap_ab.record(Path(tmp) / "stub", module=stub, every=10**9):
            wrapped = per_call(stub, 20_000)
        print(f"the wrapper alone (a stub, no kernel; {args.rows} x {args.topk}, 5 tensors): {bare:.2f} µs bare, "
              f"{wrapped:.2f} µs recorded and not sampled: +{wrapped - bare:.2f} µs per call")

        plain = per_call(kernels_main, calls)
        with remap_ab.record(Path(tmp) / "unsampled", module=kernels_main, every=10**9) as rec:
            unsampled = per_call(kernels_main, calls)
        print(f"kernels_main convert, T={args.rows} K={args.topk}, BLOCK_STRIDE_ROWS and caller buffers, {calls} calls "
              f"x {args.repeats}: {plain:.2f} µs per call unwrapped, {unsampled:.2f} µs recorded and not sampled "
              f"(+{unsampled - plain:.2f} µs, {100 * (unsampled - plain) / plain:+.1f}%)")

        host, gpu = [], []
        with remap_ab.record(Path(tmp) / "sampled", module=kernels_main, every=1) as rec:
            for _ in range(sampled_n):
                while rec._queue.qsize():  # each sampled call meets an idle writer
                    time.sleep(0.001)
                sync()
                if cuda:
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                t0 = time.perf_counter()
                kernels_main.triton_convert_req_index_to_global_index(req, table, ids, **kwargs)
                host.append((time.perf_counter() - t0) * 1e6)
                if cuda:
                    end.record()
                    end.synchronize()
                    gpu.append(start.elapsed_time(end) * 1e3)
        line = (f"sampled calls, one at a time ({sampled_n}): host {statistics.median(host):.1f} µs per call "
                f"(the copies on the caller's stream and the hand-over)")
        if cuda:
            base = []
            for _ in range(sampled_n):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                kernels_main.triton_convert_req_index_to_global_index(req, table, ids, **kwargs)
                end.record()
                end.synchronize()
                base.append(start.elapsed_time(end) * 1e3)
            line += (f"; on the caller's stream {statistics.median(gpu):.1f} µs against {statistics.median(base):.1f} µs "
                     "unwrapped (call start to end events)")
        print(line + f"; {rec.stats['written']} written, {rec.stats['duplicates']} identical ones not")

        if cuda:
            with remap_ab.record(Path(tmp) / "sync", module=kernels_main, every=2) as rec:
                torch.cuda.set_sync_debug_mode("error")
                try:
                    for _ in range(50):
                        kernels_main.triton_convert_req_index_to_global_index(req, table, ids, **kwargs)
                finally:
                    torch.cuda.set_sync_debug_mode(0)
            print(f"host syncs: none in 50 calls, 25 of them sampled, under torch.cuda.set_sync_debug_mode('error') "
                  f"(writer errors: {rec.stats['errors'] or 'none'})")

        # Disk: a serving mix (decode T from 1 to 64, a prefill chunk of 512 rows every 50th
        # call), distinct inputs each call, at the default sampling.
        folder = Path(tmp) / "disk"
        mix = [inputs(1 + i % 64, i) if i % 50 else inputs(512, i) for i in range(200)]
        t0 = time.perf_counter()
        with remap_ab.record(folder, module=stub, every=every) as rec:
            for i in range(args.disk_calls):
                while rec._queue.qsize() > 8:  # a serving step takes milliseconds; this loop, microseconds
                    time.sleep(0.001)
                r, t, x = mix[i % len(mix)]
                stub.triton_convert_req_index_to_global_index(r, t, x, BLOCK_SIZE=64, NUM_TOPK_TOKENS=args.topk,
                                                              return_valid_counts=True)
        wall = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in folder.iterdir())
        sigs = len({f.name.split("-")[2] for f in folder.glob("*.pt.gz")})
        print(f"disk per {args.disk_calls:,} calls (decode T 1-64 and a 512-row prefill every 50th, K={args.topk}, "
              f"every={every}): {rec.stats['written']} samples of {sigs} signatures, {size / 1e6:.2f} MB on disk; "
              f"{rec.stats['dropped_busy']} dropped while the writer was busy; {wall:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
