"""Host microseconds per wrapper call of kernels_old and kernels_new (issue 14 item 6).

On a GPU (the real measurement; T=1, K=512, counts path, 2000 calls, one
torch.cuda.synchronize at the end):

    python3 scripts/host_overhead.py                      # old and new
    python3 scripts/host_overhead.py --impl vllm.v1.attention.backends.mla.sparse_utils

On a CPU there is no launch to time: --stub-launch replaces the launch by what Triton
does on the host before the driver call (bind the arguments, specialise each one,
look up the compiled kernel's key), so what is timed is the wrapper's own Python and
tensor allocations plus Triton's per-argument work; the driver's launch is left out.
"""

import argparse
import importlib
import os
import sys
import time


class _HostSideOnly:
    """Stands in for a @triton.jit kernel: kernel[grid](*args, **kwargs) does Triton's
    host-side work for the call (bind, specialise, cache key) and launches nothing."""

    def __init__(self, jit_function):
        from triton.backends.compiler import GPUTarget
        from triton.compiler.compiler import make_backend
        from triton.runtime.jit import compute_cache_key, create_function_from_signature

        backend = make_backend(GPUTarget("cuda", 90, 32))
        self._binder = create_function_from_signature(jit_function.signature, jit_function.params, backend)
        self._key = compute_cache_key
        self._cache = {}

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            kwargs["debug"] = False
            kwargs["instrumentation_mode"] = ""
            _, specialization, options = self._binder(*args, **kwargs)
            return self._key(self._cache, specialization, options)

        return launch


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--impl", action="append", help="module path(s) (default: kernels_old and kernels_new)")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--tokens", type=int, default=1)
    p.add_argument("--topk", type=int, default=512)
    p.add_argument("--no-counts", action="store_true")
    p.add_argument("--stub-launch", action="store_true", help="CPU: time the wrapper without any kernel")
    p.add_argument("--repeats", type=int, default=5, help="report the best of this many timed loops")
    args = p.parse_args()
    if args.stub_launch:
        os.environ.pop("TRITON_INTERPRET", None)
    import torch

    device = "cpu" if args.stub_launch else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: run on the GPU, or pass --stub-launch to time the wrapper alone on the CPU")
    g = torch.Generator().manual_seed(0)
    t, k, w = args.tokens, args.topk, 64
    req_id = torch.zeros(t, dtype=torch.int32).to(device)
    block_table = torch.randint(0, 1 << 20, (2, w), generator=g, dtype=torch.int32).to(device)
    tokens = torch.randint(-1, w * 64, (t, k), generator=g, dtype=torch.int32).to(device)
    for name in args.impl or ["kernels_old", "kernels_new"]:
        module = importlib.import_module(name)
        remap = importlib.import_module(name + "._remap") if args.stub_launch else None
        if remap is not None:
            remap._convert_req_index_to_global_index_kernel = _HostSideOnly(remap._convert_req_index_to_global_index_kernel)
        fn = module.triton_convert_req_index_to_global_index

        def call(fn=fn):
            return fn(req_id, block_table, tokens, NUM_TOPK_TOKENS=k, return_valid_counts=not args.no_counts)

        for _ in range(50):  # compile and warm
            call()
        if device == "cuda":
            torch.cuda.synchronize()
        best = float("inf")
        for _ in range(args.repeats):
            start = time.perf_counter()
            for _ in range(args.calls):
                call()
            if device == "cuda":
                torch.cuda.synchronize()
            best = min(best, (time.perf_counter() - start) / args.calls)
        mode = "wrapper + Triton binding, no driver launch" if args.stub_launch else "host per call incl. launch"
        print(f"{name:>24}: {best * 1e6:6.2f} µs per call ({mode}; T={t}, K={k}, counts={not args.no_counts}, {args.calls} calls)")


if __name__ == "__main__":
    main()
