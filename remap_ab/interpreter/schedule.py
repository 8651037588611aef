"""Program schedules for the Triton interpreter: run a launch's programs in another
order than row-major, so that races between programs show up without a GPU.

The interpreter walks the grid in row-major order and, before each program, tells its
builder which grid index is current; ``tl.program_id`` reads it back. Replacing that
one setter so the k-th program run receives the k-th index of a permutation reorders
the programs without touching the kernel source. Every program still runs exactly
once and to completion, as on a GPU where the programs of a row do not overlap.

The batched interpreter (``interp_batched``) runs all programs of a launch together and
asks ``launch_order`` which order they would have run in, so the same schedules give the
same atomic results in both modes.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

POLICIES = ("row_major", "reversed", "random", "tiles_reversed", "tiles_rotated")

Grid = tuple[int, int, int]


def program_order(policy: str, grid: Grid, seed: int = 0) -> list[Grid]:
    """All grid indices of ``grid`` in the order ``policy`` runs them.

    row_major       the interpreter's own order (and the identity schedule)
    reversed        last program first
    random          a seeded uniform shuffle of all programs
    tiles_reversed  rows in order, the tiles of each row last to first: the adversary
                    of a column-ordered compaction (every multi-tile row reverses)
    tiles_rotated   rows in order, row r's tiles starting at tile (r + seed) mod n
    """
    nx, ny, nz = grid
    base = [(x, y, z) for x in range(nx) for y in range(ny) for z in range(nz)]
    if policy == "row_major":
        return base
    if policy == "reversed":
        return base[::-1]
    if policy == "random":
        rng = random.Random(seed)
        shuffled = list(base)
        rng.shuffle(shuffled)
        return shuffled
    if policy == "tiles_reversed":
        return [(x, y, z) for x in range(nx) for y in reversed(range(ny)) for z in range(nz)]
    if policy == "tiles_rotated":
        return [(x, (y + x + seed) % ny, z) for x in range(nx) for y in range(ny) for z in range(nz)]
    raise ValueError(f"unknown schedule policy {policy!r}; choose one of {', '.join(POLICIES)}")


# The schedule in force ((policy, seed)) and the set_grid_idx replacement that carries
# it, so launch_order can tell our patch from anyone else's.
_active: list = []


def launch_order(grid: Grid, as_array: bool = False):
    """The order in which the sequential interpreter would run ``grid``'s programs right
    now: the innermost ``interpreter_schedule``'s, else row-major; a list of grid
    indices, or with ``as_array`` an int64 array of shape (programs, 3). None when the
    interpreter's ``set_grid_idx`` was replaced by something this module did not install
    (its order is then unknown, and only the sequential interpreter honours it)."""
    from triton.runtime import interpreter

    patched = vars(interpreter.interpreter_builder).get("set_grid_idx")
    if not _active:
        if patched is not None:
            return None
        if as_array:  # the common case, without a Python tuple per program
            import numpy as np

            return np.indices(grid, dtype=np.int64).reshape(3, -1).T.copy()
        return program_order("row_major", grid)
    policy, seed, ours = _active[-1]
    if patched is not ours or len(_active) > 1:  # nested schedules compose their orders
        return None
    order = program_order(policy, grid, seed)
    if as_array:
        import numpy as np

        return np.asarray(order, dtype=np.int64).reshape(-1, 3)
    return order


@contextlib.contextmanager
def interpreter_schedule(policy: str, seed: int = 0) -> Iterator[None]:
    """Within this block, every interpreted launch runs its programs in ``policy``
    order. Needs ``TRITON_INTERPRET=1`` (remap_ab.runtime.select('cpu'))."""
    from triton.runtime import interpreter

    program_order(policy, (1, 1, 1), seed)  # an unknown policy fails here, not mid-launch
    builder = interpreter.interpreter_builder
    had_own = "set_grid_idx" in vars(builder)
    original = builder.set_grid_idx
    state: dict = {"grid": None, "order": None, "k": 0}

    def set_grid_idx(x: int, y: int, z: int) -> None:
        grid = tuple(builder.grid_dim)
        if state["grid"] != grid or (x, y, z) == (0, 0, 0):
            # A new launch starts at (0, 0, 0): build its order and restart the count.
            state.update(grid=grid, order=program_order(policy, grid, seed), k=0)
        idx = state["order"][state["k"]]
        state["k"] += 1
        original(*idx)

    builder.set_grid_idx = set_grid_idx
    _active.append((policy, seed, set_grid_idx))
    try:
        yield
    finally:
        _active.pop()
        if had_own:
            builder.set_grid_idx = original  # an outer schedule's
        else:
            # Drop the instance attribute so the class's own method shows through again.
            del builder.set_grid_idx


def schedules(policies=POLICIES, seeds=(0,)) -> list[tuple[str, int]]:
    """(policy, seed) pairs: one for each deterministic policy, one per seed for random."""
    out: list[tuple[str, int]] = []
    for p in policies:
        out += [(p, s) for s in seeds] if p in ("random", "tiles_rotated") else [(p, 0)]
    return out

