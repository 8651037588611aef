"""Compile ahead: the Triton variants of coming cases, compiled in processes of their
own on the host's cores while the device runs the cases already compiled.

Triton compiles without a GPU: given the device's target (``GPUTarget("cuda", 90, 32)``
for an H200), a process with no CUDA at all produces the cubin, and writes it to
Triton's on-disk cache under the same key the device process computes at its launch;
the device process then only loads it. A compile worker runs each implementation's
real wrapper on the case's inputs made on the CPU, with every Triton launch turned
into a warm-up (``JITFunction.run(..., warmup=True)``: compile, do not launch) under a
stand-in driver that reports the device's target. So whatever kernels and
specialisations a wrapper chooses (strides, alignment, constexprs), the worker
compiles exactly those, without knowing the implementation.

Nothing here decides a verdict: a variant that fails to compile ahead is compiled by
the device process itself at its launch, as without this module. The CPU path (the
interpreter, which compiles nothing) never uses it.
"""

from __future__ import annotations

import contextlib
import os
import time
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Optional

from remap_ab import registry, runtime
from remap_ab.config import CaseConfig
from remap_ab.errors import exception_line
from remap_ab.inputs import generate_inputs


def variant_key(config) -> tuple:
    """What decides which kernel a case compiles in the project's wrappers: the
    constexprs (K, BLOCK_N, BLOCK_SIZE, W, the DCP size, rank and interleave, the
    path's flags) and the inputs' layout. Cases with one key share their compiles;
    an implementation that specialises on more compiles more, which costs time only.
    One token row or one request is a variant too: ``.contiguous()`` keeps a strided
    view with a dimension of size 1 as it is, so its row stride reaches the kernel
    (a different specialisation than a copy's)."""
    size, rank, interleave = config.effective_dcp
    return (config.mode, config.counts_returned, config.has_prefill, config.compacts, config.topk, config.block_n,
            config.block_size, config.blocks_per_req, size, rank, interleave, getattr(config, "layout", ""),
            config.tokens == 1, config.num_reqs == 1)


@dataclass(frozen=True)
class Target:
    """A Triton target as plain data (it crosses into the compile workers)."""

    backend: str
    arch: Any  # 90 for sm_90; "gfx942" on ROCm
    warp_size: int

    def gpu_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget(self.backend, self.arch, self.warp_size)


def device_target() -> Target:
    """The target of this process's active Triton driver (call it in the device process)."""
    from triton.runtime import driver

    t = driver.active.get_current_target()
    return Target(t.backend, t.arch, t.warp_size)


@dataclass
class Warmed:
    """What a compile worker did for one case: its seconds, the kernels it compiled and
    found already in the on-disk cache, or why it could not."""

    case_id: str
    seconds: float
    compiled: int = 0
    cached: int = 0
    error: str = ""
    counted: bool = True  # False: this Triton has no compilation listener to count with


# --------------------------------------------------------------------------- the worker side

_COUNTS = {"compiled": 0, "cached": 0}


class _TargetDriver:
    """Triton's active driver in a compile worker: it reports the device's target and
    device 0; nothing is ever launched through it."""

    def __init__(self, target):
        self.target = target

    def get_current_target(self):
        return self.target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_active_torch_device(self):
        import torch

        return torch.device("cpu")

    def is_active(self):
        return True


def _init_worker(target: Target) -> None:
    """A compile worker's set-up: no interpreter, no CUDA, the device's target, and a
    lower CPU priority: the device process, not the compiling, sets the soak's pace, and
    it judged slower beside workers that held every core."""
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    with contextlib.suppress(OSError):
        os.nice(10)

    runtime.select_compile_only()
    import triton.language as tl

    if type(tl.sum).__name__ == "InterpretedFunction":
        raise RuntimeError("triton was imported with TRITON_INTERPRET=1 in a compile worker")
    from triton import knobs
    from triton.runtime import driver
    from triton.runtime.jit import JITFunction

    driver.set_active(_TargetDriver(target.gpu_target()))
    launch = JITFunction.run

    def warm_only(self, *args, grid, warmup, **kwargs):
        return launch(self, *args, grid=grid, warmup=True, **kwargs)

    JITFunction.run = warm_only

    def listener(*, src, metadata, metadata_group, times, cache_hit):
        _COUNTS["cached" if cache_hit else "compiled"] += 1

    if _has_listener():
        knobs.compilation.listener = listener
    else:
        _COUNTS["uncounted"] = 1


def _has_listener() -> bool:
    """Whether this Triton reports each compile and cache hit (knobs.compilation.listener)."""
    try:
        from triton import knobs

        return hasattr(knobs.compilation, "listener")
    except (ImportError, AttributeError):
        return False


def _warm(a: str, b: str, config_dicts: list) -> list[Warmed]:
    """Run A's and B's wrappers on each case's CPU inputs with every launch a warm-up."""

    done = []
    for d in config_dicts:
        config = CaseConfig.from_dict(d)
        start = time.perf_counter()
        before = dict(_COUNTS)
        error = ""
        try:
            small = _stand_in(config)  # the same kernels (tests/test_precompile.py), inputs made in no time
            inputs = generate_inputs(small, device="cpu")
            for name in (a, b):
                registry.get(name)(small, inputs)
        except Exception as exc:  # the device process compiles it itself then
            error = exception_line(exc)[:300]
        done.append(Warmed(config.case_id, time.perf_counter() - start, _COUNTS["compiled"] - before["compiled"],
                           _COUNTS["cached"] - before["cached"], error, counted="uncounted" not in _COUNTS))
    return done


# --------------------------------------------------------------------------- the device side


def default_workers(device_processes: int = 1) -> int:
    """The host's cores less one per device process (which keeps its own)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores - device_processes)


class Ahead:
    """Compile workers for one device process: ``submit`` the cases of variants not
    yet compiled, ask ``ready`` which variants are, ``close`` at the end. Counts what
    the workers did (``compiled``, ``cached``, ``failed``, ``worker_seconds``)."""

    def __init__(self, a: str, b: str, target: Target, workers: int):
        import multiprocessing as mp

        self.a, self.b = a, b
        self.workers = workers
        self.pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                                        initializer=_init_worker, initargs=(target,))
        self.pending: dict[tuple, Future] = {}
        self.done: set = set()
        self.compiled = self.cached = self.failed = self.variants = 0
        self.worker_seconds = 0.0
        self.first_error: Optional[str] = None
        self.counted = True

    def submit(self, config) -> None:
        """Compile ``config``'s variant ahead, unless it is compiled or on its way."""
        key = variant_key(config)
        if key in self.done or key in self.pending:
            return
        self.pending[key] = self.pool.submit(_warm, self.a, self.b, [config.to_dict()])

    def ready(self, config) -> bool:
        key = variant_key(config)
        if key in self.done:
            return True
        future = self.pending.get(key)
        if future is None or not future.done():
            return False
        self._collect(key, future)
        return True

    def started(self) -> bool:
        """Has any compile worker finished a variant yet (are they past their start-up)?"""
        return bool(self.done) or any(f.done() for f in self.pending.values())

    def wait_any(self, timeout: float) -> None:
        """Block until some pending compile finishes (or ``timeout`` passes)."""
        from concurrent.futures import FIRST_COMPLETED, wait

        if self.pending:
            wait(list(self.pending.values()), timeout=timeout, return_when=FIRST_COMPLETED)

    def _collect(self, key: tuple, future: Future) -> None:
        del self.pending[key]
        self.done.add(key)
        try:
            results = future.result()
        except Exception as exc:  # a broken worker: the device process compiles it itself
            results = [Warmed("?", 0.0, error=f"compile worker failed: {exc!r}"[:300])]
        for w in results:
            self.variants += 1
            self.counted = self.counted and w.counted
            self.compiled += w.compiled
            self.cached += w.cached
            self.worker_seconds += w.seconds
            if w.error:
                self.failed += 1
                self.first_error = self.first_error or w.error

    def summary(self) -> str:
        if self.counted:
            done = f"{self.compiled} kernels compiled, {self.cached} found in Triton's cache"
        else:
            done = f"{self.variants} variants (kernels not counted: this Triton has no compilation listener)"
        line = f"compiled ahead by {self.workers} worker(s): {done}, {self.worker_seconds:.1f} s of worker time"
        if self.failed:
            line += f"; {self.failed} variants not compiled ahead (first: {self.first_error})"
        return line

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


class Loads:
    """In the device process: the Triton kernels it compiled itself and those it loaded
    from the on-disk cache, with their seconds (Triton's compilation listener)."""

    def __init__(self, active: bool = True):
        self.compiled = self.cached = 0
        self.compile_seconds = self.load_seconds = 0.0
        self._previous = None
        self.active = active

    @classmethod
    def none(cls) -> Loads:
        """Counts nothing (the interpreter compiles nothing)."""
        return cls(active=False)

    def __enter__(self):
        if self.active and not _has_listener():
            self.active = False  # counted nowhere: the worker's line says so (WorkerTimes.counted)
        if not self.active:
            return self
        from triton import knobs

        self._previous = knobs.compilation.listener

        def listener(*, src, metadata, metadata_group, times, cache_hit):
            seconds = (times.ir_initialization + sum(t for _, t in times.lowering_stages) + times.store_results) / 1e6
            if cache_hit:
                self.cached += 1
                self.load_seconds += seconds
            else:
                self.compiled += 1
                self.compile_seconds += seconds
            if self._previous is not None:
                self._previous(src=src, metadata=metadata, metadata_group=metadata_group, times=times,
                               cache_hit=cache_hit)

        knobs.compilation.listener = listener
        return self

    def __exit__(self, *exc) -> None:
        if not self.active:
            return
        from triton import knobs

        knobs.compilation.listener = self._previous


# --------------------------------------------------------------------------- stand-ins


def _stand_in(config):
    """A case with ``config``'s kernels and specialisations but at most two rows and
    requests (two, not one: a dimension of size 1 changes what is contiguous)."""
    return config.replace(tokens=min(config.tokens, 2), num_reqs=min(config.num_reqs, 2))
