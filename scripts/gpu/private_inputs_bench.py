"""One batch of the sweep's cases on the GPU: ``PrivateInputs`` (A's and B's copies)
timed alone and right after ``hashing_started``, and a bare ``as_strided`` on a CUDA and a
CPU tensor. Until fe3a400 the hashing threads ran beside the launches and took the GIL from
them: 2.3 ms alone, 15 ms beside them (docs/measured/h200-2026-12-01-d).
    python3 scripts/gpu/private_inputs_bench.py [--cpu]
"""

from __future__ import annotations

import sys
import time

sys.path.insert(0, ".")

from remap_ab import backend  # noqa: E402

backend.select("cpu" if "--cpu" in sys.argv else "cuda")
import torch  # noqa: E402

DEV = torch.device("cpu" if "--cpu" in sys.argv else "cuda")

from remap_ab import grid as gridmod  # noqa: E402
from remap_ab.batch import _hashers  # noqa: E402
from remap_ab.call import PrivateInputs  # noqa: E402
from remap_ab.inputs import generate_inputs_batch, hashing_started  # noqa: E402


def best(fn, n=20):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times) * 1e3, sorted(times)[len(times) // 2] * 1e3


for where in (["cpu"] if DEV.type == "cpu" else ["cuda", "cpu"]):
    x = torch.zeros(1000, dtype=torch.int32, device=where)
    lo, med = best(lambda x=x: [x.as_strided((10, 10), (10, 1), 3) for _ in range(1000)])
    print(f"1000 as_strided on {where}: best {lo:.2f} ms, median {med:.2f} ms")

points = gridmod.load().points()
configs = [p.config for p in points][:64]
inputs = generate_inputs_batch(configs, device=DEV)
torch.cuda.synchronize() if DEV.type == 'cuda' else None
n = sum(len(x.tensors()) for x in inputs)
print(f"a batch of {len(inputs)} cases, {n} tensors")
lo, med = best(lambda: generate_inputs_batch(configs, device=DEV), 5)
print(f"generate_inputs_batch: best {lo:.2f} ms, median {med:.2f} ms")
lo, med = best(lambda: PrivateInputs.each(inputs, 2))
print(f"PrivateInputs.each(2) alone: best {lo:.2f} ms, median {med:.2f} ms")


def after_hashing():
    done = hashing_started(inputs, _hashers())
    t = time.perf_counter()
    PrivateInputs.each(inputs, 2)
    spent = time.perf_counter() - t
    done()
    return spent


spent = sorted(after_hashing() for _ in range(20))
print(f"PrivateInputs.each(2) right after hashing_started: best {spent[0] * 1e3:.2f} ms, median {spent[10] * 1e3:.2f} ms")

# hashing_started itself, on the grid's smallest and largest batch of 64 (7 and 135 MB of
# inputs), again and again (pinned host buffers reused), and under cProfile.
import cProfile  # noqa: E402
import pstats  # noqa: E402

for label, chosen in (("7 MB", [p.config for p in points][:64]), ("135 MB", [p.config for p in points][128:192])):
    batch = generate_inputs_batch(chosen, device=DEV)
    torch.cuda.synchronize() if DEV.type == "cuda" else None
    first = time.perf_counter()
    hashing_started(batch, _hashers())()
    first = time.perf_counter() - first
    lo, med = best(lambda batch=batch: hashing_started(batch, _hashers()))
    whole = sorted(best(lambda batch=batch: hashing_started(batch, _hashers())())[0] for _ in range(3))[0]
    print(f"{label} batch: hashing_started first {first * 1e3:.2f} ms, then best {lo:.2f} ms, median {med:.2f} ms; "
          f"with its digests (finished()) best {whole:.2f} ms")
prof = cProfile.Profile()
prof.enable()
for _ in range(10):
    hashing_started(batch, _hashers())()
prof.disable()
pstats.Stats(prof).sort_stats("tottime").print_stats(14)
