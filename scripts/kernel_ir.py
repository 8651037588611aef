"""What the vendored kernels compile to, without a GPU: for each variant the wrappers
launch, compile for an H100/H200 (sm_90) and print the order of the memory operations
and reductions in the TTGIR, and the registers, spills and shared memory ptxas reports.

    python3 scripts/kernel_ir.py                 # counts path at K = 512 and 2048
    python3 scripts/kernel_ir.py --path all --dump /tmp/ir   # also write each .ttgir

Runs on any machine with Triton (the compiler and ptxas ship with it); the kernels are
compiled exactly as the wrappers launch them (unused pointers None, strides of
contiguous inputs, the wrappers' tiling and warps).
"""

import argparse
import importlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PATHS = {
    # name: (counts, compact, dcp_size)
    "counts": (True, False, 1),
    "nocounts": (False, False, 1),
    "dcp-compact": (True, True, 4),
}
OPS = re.compile(r'(?<![\w.])(tt\.load|tt\.store|tt\.atomic_rmw)\b|"(tt\.reduce|tt\.scan)"')


def variant(impl: str, path: str, topk: int, block_n: int, width: int = 64, block_size: int = 64):
    """(signature, constexprs, num_warps, grid tiles) as the wrapper would launch."""
    counts, compact, dcp = PATHS[path]
    module = importlib.import_module(impl + "._remap" if impl.startswith("kernels_") else impl)
    fn = module._convert_req_index_to_global_index_kernel
    names = fn.arg_names
    tiling = getattr(module, "_remap_tiling", None)
    if tiling is not None:
        single, bn, tiles, warps = tiling(topk, block_n, counts)
    else:
        single, bn, tiles, warps = False, block_n, topk // block_n, 4  # Triton's default num_warps
    const = {
        "max_num_blocks_per_req": width, "BLOCK_SIZE": block_size, "NUM_TOPK_TOKENS": topk, "BLOCK_N": bn,
        "HAS_PREFILL": False, "COUNT_VALID": counts, "COMPACT_TO_FRONT": compact, "DCP_SIZE": dcp, "DCP_RANK": 0,
        "CP_INTERLEAVE": 1, "prefill_request_id_ptr": None, "workspace_starts_ptr": None,
        # contiguous inputs: the second strides are 1, which Triton specialises as a constant
        "bt_stride1": 1, "ti_stride1": 1, "out_stride1": 1,
    }
    if "SINGLE_TILE" in names:
        const["SINGLE_TILE"] = single
    if not counts:
        const["valid_counts_ptr"] = None
    sig = {n: ("*i32" if n.endswith("_ptr") else "i32") for n in names}
    sig.update({k: "constexpr" for k in const})
    return fn, names, sig, const, warps, tiles


def compile_variant(impl, path, topk, block_n):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn, names, sig, const, warps, tiles = variant(impl, path, topk, block_n)
    src = ASTSource(fn, sig, constexprs={(names.index(k),): v for k, v in const.items()})
    with triton.knobs.compilation.scope():
        # A GPU process's cache entry holds the binary only (remap_ab.backend): compile anew for the IRs.
        triton.knobs.compilation.always_compile = True
        kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    return kernel, warps, tiles


def ptxas_resources(ptx: str) -> str:
    import triton

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "k.ptx"
        f.write_text(ptx)
        arch = re.search(r"\.target (sm_\w+)", ptx).group(1)
        res = subprocess.run([str(ptxas), f"-arch={arch}", "-v", str(f), "-o", str(Path(d) / "k.cubin")],
                             capture_output=True, text=True, check=False)
    text = res.stderr + res.stdout
    regs = re.search(r"Used (\d+) registers", text)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
    smem = re.search(r"(\d+) bytes smem", text)
    return (f"regs {regs.group(1) if regs else '?'}, spill st/ld {spill.group(1) + '/' + spill.group(2) if spill else '?'}, "
            f"static smem {smem.group(1) if smem else '0'} B")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--path", default="counts", choices=[*PATHS, "all"])
    p.add_argument("--topk", default="512,2048")
    p.add_argument("--block-n", type=int, default=128)
    p.add_argument("--impl", default="kernels_old,kernels_new")
    p.add_argument("--dump", metavar="DIR", help="write each variant's .ttgir there")
    args = p.parse_args()
    paths = list(PATHS) if args.path == "all" else [args.path]
    for path in paths:
        for topk in map(int, args.topk.split(",")):
            for impl in args.impl.split(","):
                kernel, warps, tiles = compile_variant(impl, path, topk, args.block_n)
                ttgir = kernel.asm["ttgir"]
                body = ttgir[ttgir.index("tt.func"):]
                order = [(a or b).replace("tt.", "") for a, b in OPS.findall(body)]
                shared = getattr(kernel.metadata, "shared", "?")
                print(f"{impl:>12} {path:>11} K={topk:<5} {tiles} tile(s), {warps} warps: {ptxas_resources(kernel.asm['ptx'])}, "
                      f"Triton shared {shared} B; order: {' '.join(order)}")
                if args.dump:
                    Path(args.dump).mkdir(parents=True, exist_ok=True)
                    (Path(args.dump) / f"{impl}-{path}-{topk}.ttgir").write_text(ttgir)


if __name__ == "__main__":
    main()
