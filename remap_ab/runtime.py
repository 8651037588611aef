"""Where kernels run: a CUDA device when there is one, else the Triton interpreter.

The interpreter is chosen by ``TRITON_INTERPRET=1`` at the moment a ``@triton.jit``
function is *decorated*, i.e. when the kernel module is imported. So the choice is
made once per process, here, before the registry imports any kernel; the user never
sets the variable by hand. Who chooses: the command line and the pytest plugin, up
front (``choose_early``); a library user's first case or implementation load
(``select``). Importing remap_ab chooses nothing.
"""

from __future__ import annotations

import contextlib
import os
import sys

from remap_ab.errors import BackendError
from remap_ab.host import gil, tuning

_chosen: str | None = None


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def default_device() -> str:
    return "cuda" if cuda_available() else "cpu"


def select(device: str | None = None) -> str:
    """Fix this process's device ("cpu" or "cuda"); later calls must agree. A process
    that only compiles (``select_compile_only``) counts as "cuda". In a process of
    remap-ab's own the first choice also tunes it (``tuning.apply``); in any other,
    nothing but the interpreter switch is set."""
    global _chosen
    if _chosen is not None and device == _chosen:
        return _chosen
    wanted = default_device() if device in (None, "auto") else device
    if wanted not in ("cpu", "cuda"):
        raise BackendError(f"device {device!r} is not one of cpu, cuda, auto")
    if wanted == "cuda" and not cuda_available():
        raise BackendError("--device cuda was asked for but torch sees no CUDA device; use --device cpu (the Triton interpreter)")
    if _chosen is not None and _chosen != wanted:
        raise BackendError(
            f"this process already runs kernels on {_chosen}; the Triton backend is fixed at import, "
            f"so run the {wanted} work in a separate process"
        )
    if _chosen is None:
        if wanted == "cpu":
            _require_interpreter_before_import()
            os.environ["TRITON_INTERPRET"] = "1"
        elif os.environ.get("TRITON_INTERPRET") == "1":
            raise BackendError("TRITON_INTERPRET=1 is set in the environment but --device cuda was asked for; unset it")
        tuning.apply(wanted)
        if wanted == "cuda" and tuning.owned() and tuning.enabled("triton_key"):
            hash_triton_in_background()
        _chosen = wanted
    return _chosen


_triton_key_thread = None  # the thread computing Triton's installation hash, until joined


def hash_triton_in_background() -> bool:
    """Start Triton's one hash of its own installation (its sources and the
    libtriton library, hundreds of MB) in a thread. Triton computes it once per
    process, at the first kernel it looks up, and every cache lookup needs it; here it
    overlaps the set-up before the first call, which waits for it
    (``triton_key_ready``) instead of hashing the same files again. Without it
    nothing changes but when it is paid. False where there is nothing to start."""
    import threading

    global _triton_key_thread
    try:  # imported here, not in the thread: two threads importing one package can deadlock
        from triton.runtime.cache import triton_key
    except ImportError:  # another Triton layout: its first lookup hashes as before
        return False
    # It reads and hashes 1 MB at a time, needing the GIL back after each: beside a busy
    # main thread, at the default switch interval, it had not finished by the first
    # lookup, which then hashed again.
    release = gil.hand_over_quickly()

    def run() -> None:
        try:
            with contextlib.suppress(Exception):
                triton_key()
        finally:
            release()

    _triton_key_thread = threading.Thread(target=run, name="remap-ab-triton-key", daemon=True)
    _triton_key_thread.start()
    return True


def triton_key_pending() -> bool:
    """Whether the background hash is still running: a first lookup now would wait for
    it (``triton_key_ready``)."""
    thread = _triton_key_thread
    return thread is not None and thread.is_alive()


def triton_key_ready() -> None:
    """Wait for the background hash (if one was started): called before every call of
    an implementation (``call.calling``), so the first kernel lookup finds it done."""
    global _triton_key_thread
    thread = _triton_key_thread
    if thread is not None:
        thread.join()
        _triton_key_thread = None


def _require_interpreter_before_import() -> None:
    # Triton's own @jit helpers (tl.sum, tl.cumsum) are decorated when triton is
    # first imported — and torch.use_deterministic_algorithms imports it. If that
    # happened without the interpreter, kernels cannot run on the CPU in this process.
    if "triton" not in sys.modules:
        return
    import triton.language as tl

    if type(tl.sum).__name__ != "InterpretedFunction":
        raise BackendError(
            "triton was imported before the CPU backend was chosen; call remap_ab.runtime.select('cpu') "
            "before anything that imports triton or torch's deterministic mode (or set TRITON_INTERPRET=1)"
        )


def select_compile_only() -> None:
    """A compile-ahead worker (precompile.py) or a cross-compiling one (bench/
    cross_compile.py): real Triton kernels, compiled for a GPU this process never
    opens; no interpreter, nothing launched."""
    global _chosen
    if _chosen not in (None, "cuda"):
        raise BackendError(f"this process already runs kernels on {_chosen}; a compile worker needs a process of its own")
    os.environ.pop("TRITON_INTERPRET", None)
    _chosen = "cuda"


@contextlib.contextmanager
def jit_launches_through(replacement):
    """Inside the block every Triton launch (``JITFunction.run``) is
    ``replacement(launch, fn, *args, grid=..., warmup=..., **kwargs)``, ``launch``
    being the run it stands in for; the original is back after the block."""
    from triton.runtime.jit import JITFunction

    launch = JITFunction.run

    def run(self, *args, grid, warmup, **kwargs):
        return replacement(launch, self, *args, grid=grid, warmup=warmup, **kwargs)

    JITFunction.run = run
    try:
        yield
    finally:
        JITFunction.run = launch


def choose_early() -> None:
    """Called by the command line and the pytest plugin before any work (never on
    ``import remap_ab``): on a machine without CUDA, turn the interpreter on before
    anything can import triton, so the user never has to."""
    if "TRITON_INTERPRET" in os.environ or "triton" in sys.modules:
        return
    if not cuda_available():
        os.environ["TRITON_INTERPRET"] = "1"


def chosen() -> str | None:
    return _chosen


def current() -> str:
    """The device this process runs kernels on: the one chosen, else the default."""
    return _chosen or default_device()
