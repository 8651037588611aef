"""Stores landed as racing threads may land them: a schedule of one program's stores that
shows a missing ``tl.debug_barrier`` on the CPU.

Triton orders a program's statements for the program as a whole, but a store is done by
the threads that hold its elements: two stores to one address from different threads are
ordered only by a barrier between them. The interpreter runs each statement to the end
for every element before the next, so a kernel that leans on an order no barrier gives
still passes there. ``relaxed_stores()`` holds each program's stores from one barrier
(or the program's start) to the next (or its end) and then lands them last-issued
first: the adversary's order, where a later store of another thread lands before an
earlier one. A kernel whose barriers order what must be ordered gives the same output;
without the barrier, the earlier store overwrites the later.

What it does not model: a load sees memory as the landed stores left it, so a program
that reads back what it stored since its last barrier reads the older value (on a GPU
the thread that stored it sees its own store): use it on kernels that do not, such as
the topology's merge. It runs launches on the sequential interpreter (``batched.using``);
Triton's builder and executor are as they were after the block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from remap_ab.interpreter import batched

_PATCHED = ("create_masked_store", "create_barrier", "set_grid_idx")


@contextlib.contextmanager
def relaxed_stores() -> Iterator[None]:
    """Interpreted launches in the block land each program's stores between barriers
    last-issued first (the module docstring)."""
    from triton.runtime import interpreter  # Triton is imported only where a kernel runs (the core knows none)

    builder = interpreter.interpreter_builder
    pending: list = []
    land_one = interpreter._interpreter.store

    def land() -> None:
        while pending:
            land_one(*pending.pop())  # last issued first

    before = {name: vars(builder).get(name) for name in _PATCHED}
    set_grid_idx = builder.set_grid_idx

    def held_store(ptrs, value, mask, cache_modifier, eviction_policy):
        pending.append((ptrs.data.copy(), value.data.copy(), mask.data.copy()))

    def next_program(x, y, z):
        land()  # the program before ends here
        set_grid_idx(x, y, z)

    owner = next(c for c in interpreter.GridExecutor.__mro__ if "_restore_args_dev" in vars(c))
    restore = vars(owner)["_restore_args_dev"]

    def restore_after_landing(self, *args, **kwargs):
        land()  # the launch's last program ends here, before its tensors go back
        return restore(self, *args, **kwargs)

    with batched.using("sequential"):
        builder.create_masked_store = held_store
        builder.create_barrier = land
        builder.set_grid_idx = next_program
        owner._restore_args_dev = restore_after_landing
        try:
            yield
        finally:
            pending.clear()
            owner._restore_args_dev = restore
            for name, value in before.items():
                if value is None:
                    vars(builder).pop(name, None)
                else:
                    setattr(builder, name, value)
