"""Memory checking on the CPU: every load, store and atomic a kernel makes under the
Triton interpreter, checked address by address against the tensors passed to its launch.

Equal outputs cannot show a read that lands outside every tensor and whose value is
then thrown away; on a GPU such a read can fault or see another request's data. Under
the interpreter each memory operation arrives as a numpy array of raw byte addresses
plus a mask, so the check is exact: a masked-in element whose ``[address, address +
itemsize)`` does not lie inside the extent of some tensor argument of the running
launch is a finding. Masked-off elements are never checked (the kernel does not touch
them).

How it hooks in (Triton 3.7's interpreter, ``triton/runtime/interpreter.py``):

- ``GridExecutor._init_args_hst`` copies a launch's arguments to the host just before
  the programs run; wrapping it gives the tensors whose addresses the kernel sees,
  named by the kernel's parameters (``x_ptr``...). Every launch inside
  ``watching`` registers them with the session (``Session.begin_launch``).
- The module-level ``interpreter_builder`` performs every memory operation through
  ``create_masked_load``, ``create_masked_store``, ``create_atomic_rmw`` and
  ``create_atomic_cas`` (unmasked loads, block pointers and descriptors all end in the
  masked ones). Instance attributes shadow them, as ``schedule.py`` does for the grid
  index, and report each call to ``Session.access`` before running the original.

Elements found out of bounds are also masked off before the original runs (a load
returns its ``other`` value there, a store writes nothing): the finding fails the case
anyway, and the interpreter would otherwise read garbage or write into the heap, or
kill the process for an address far away.

A batched interpreter that runs a launch's programs together reports its accesses
through the same entry point: ``active()`` gives the session, ``access(kind,
addresses, mask, programs)`` checks them. If it does not call ``_init_args_hst`` it
must call ``begin_launch`` itself; an access with no launch registered is an
``InternalError``, never a silent pass.

Column of an element (of an access's block of addresses): a tiled kernel's program
owns the columns ``program_id(1) * width + i``, ``width`` being the number of elements
on the access's last axis and ``i`` the element's place there. The check derives the
column that way for any access whose last axis holds more than one element of one
program; an access of one element per program (a per-row scalar: ``x[row]``, an atomic
on a row's count) gets column -1, "the row as a whole". A kernel that lays its columns
out otherwise gets a column that is only the element's position: the address and
tensor named are exact.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from remap_ab.errors import InternalError
from remap_ab.status import plural

KINDS = ("load", "store", "atomic")
DETAILED_FINDINGS = 20  # findings kept in full per session; every bad element is still counted


@dataclass(frozen=True)
class Region:
    """The bytes one tensor argument spans: ``[start, end)``. ``names`` are the kernel
    parameters (or caller names) that received it, the first one used in messages."""

    names: tuple
    start: int
    end: int
    itemsize: int
    numel: int

    @property
    def name(self) -> str:
        return self.names[0]


_NO_TENSOR = Region(("no tensor argument",), 0, 0, 1, 0)


@dataclass(frozen=True)
class Finding:
    """One element of an access that touched memory outside every argument tensor."""

    label: str  # the implementation (what watching() was told)
    kernel: str
    kind: str  # load / store / atomic
    row: int  # program_id(0)
    col: int  # the element's column, -1 for a one-element-per-program access
    program: tuple  # (x, y, z)
    address: int
    itemsize: int
    nearest: str  # the argument tensor the address is closest to
    bytes_after_end: int  # address - end of nearest (>= 0), or -1 when before its start
    bytes_before_start: int  # start - address (> 0), or -1 when after its end
    nearest_numel: int
    nearest_itemsize: int
    note: str = ""  # extra words from the tool (a GPU thread id); the whole message for a non-access error

    @property
    def elements_past_last(self) -> int:
        """How many elements past the nearest tensor's last one: 1 = the element just after."""
        if self.bytes_after_end < 0:
            return 0
        return self.bytes_after_end // self.nearest_itemsize + 1

    def where(self) -> str:
        """Where the address lies relative to the nearest tensor, in elements and bytes."""
        if self.nearest == _NO_TENSOR.name:
            return "and the launch has no tensor argument"
        if self.bytes_after_end >= 0:
            n = self.elements_past_last
            return (
                f"{n} element{'s' if n != 1 else ''} past the last element of {self.nearest} "
                f"({self.nearest_numel} elements of {self.nearest_itemsize} bytes; "
                f"{self.bytes_after_end} bytes after its end)"
            )
        n = -(-self.bytes_before_start // self.nearest_itemsize)
        return (
            f"{n} element{'s' if n != 1 else ''} before the first element of {self.nearest} "
            f"({self.bytes_before_start} bytes before its start)"
        )

    def describe(self) -> str:
        if self.kind not in KINDS:
            return self.note
        x, y, z = self.program
        col = f", column {self.col}" if self.col >= 0 else ""
        text = (
            f"{self.kind} of {self.itemsize} bytes outside every argument tensor in kernel {self.kernel} "
            f"(program ({x}, {y}, {z}): row {self.row}{col}) at address {self.address:#x}, {self.where()}"
        )
        return f"{text}; {self.note}" if self.note else text


@dataclass
class MemcheckReport:
    """What one watched run saw: how much was checked and every out-of-bounds element."""

    label: str
    launches: int = 0
    elements_checked: int = 0
    bad_elements: int = 0
    bad_rows: set = field(default_factory=set)
    bad_by_group: dict = field(default_factory=dict)  # (kind, kernel, nearest) -> bad elements
    rows_by_group: dict = field(default_factory=dict)  # (kind, kernel, nearest) -> set of rows
    findings: list = field(default_factory=list)  # the first DETAILED_FINDINGS, in order, and each group's first
    source: str = "interpreter"  # or "compute-sanitizer" (sanitizer.py)
    detail: str = ""  # the sanitizer's own summary, e.g. "ERROR SUMMARY: 0 errors"

    @property
    def clean(self) -> bool:
        return self.bad_elements == 0

    def summary(self) -> str:
        if self.source != "interpreter":
            state = "clean" if self.clean else f"{self.bad_elements} invalid accesses in {len(self.bad_rows)} rows"
            return f"memcheck {self.label} ({self.source}): {state} ({self.detail})"
        if self.launches == 0:
            return f"memcheck {self.label}: no Triton launch to check (nothing checked)"
        bad = f"{plural(self.bad_elements, 'element')} out of bounds in {plural(len(self.bad_rows), 'row')}"
        state = "clean" if self.clean else bad

        launches = plural(self.launches, "launch", "launches")
        return f"memcheck {self.label}: {state} ({self.elements_checked} active elements in {launches} checked)"


class Session:
    """The checker of one watched run. ``access`` is the entry point for every memory
    operation, sequential or batched."""

    def __init__(self, label: str, tensors: dict | None = None):
        self.report = MemcheckReport(label)
        self._caller_regions = _regions(tensors or {})
        self._kernel: str | None = None
        self._regions: list[Region] = []
        self._starts = self._ends = np.zeros(0, dtype=np.int64)

    # -- launches

    def begin_launch(self, kernel: str, named_args: dict) -> None:
        """Register the tensor arguments of the launch about to run. A tensor the caller
        named in ``watching`` (same bytes) keeps the caller's name, e.g. ``x`` rather
        than the kernel's ``x_ptr``."""
        launch = _regions({k: v for k, v in named_args.items() if _is_tensor(v)}, strip_ptr=True)
        by_span = {(r.start, r.end): r for r in launch}
        for r in self._caller_regions:  # names only: the bounds are the launch's
            held = by_span.get((r.start, r.end))
            if held is not None:
                names = r.names + tuple(n for n in held.names if n not in r.names)
                by_span[(r.start, r.end)] = Region(names, r.start, r.end, r.itemsize, r.numel)
        # A launch without tensor arguments has nothing to be inside: every access is
        # out of bounds, reported against a placeholder region.
        self._regions = sorted(by_span.values(), key=lambda r: (r.start, r.end)) or [_NO_TENSOR]
        self._starts = np.array([r.start for r in self._regions], dtype=np.int64)
        self._ends = np.array([r.end for r in self._regions], dtype=np.int64)
        self._kernel = kernel
        self.report.launches += 1

    # -- accesses

    def access(self, kind: str, addresses, mask, programs, itemsize: int = 1) -> np.ndarray:
        """Check the masked-in elements of one memory operation.

        ``addresses``: int64 byte addresses (any shape); ``mask``: bool, broadcastable
        to it; ``programs``: int64 ``addresses.shape + (3,)``, each element's grid index;
        ``itemsize``: bytes each element touches (1 checks the first byte only).
        Returns the bool array of elements that are active and in bounds: those a
        caller may let through."""
        if kind not in KINDS:
            raise InternalError(f"memcheck access kind {kind!r} is not one of {', '.join(KINDS)}")
        kernel = self._kernel
        if kernel is None:
            raise InternalError("memcheck saw a memory access before any launch registered its tensors")
        addr = np.asarray(addresses).astype(np.int64, copy=False)
        active = np.broadcast_to(np.asarray(mask, dtype=bool), addr.shape)
        inside = np.zeros(addr.shape, dtype=bool)
        last = addr + itemsize
        for start, end in zip(self._starts.tolist(), self._ends.tolist()):
            inside |= (addr >= start) & (last <= end)
        self.report.elements_checked += int(np.count_nonzero(active))
        bad = active & ~inside
        if bad.any():
            self._record(kind, kernel, addr, bad, np.asarray(programs), itemsize)
        return active & inside

    def _record(self, kind: str, kernel: str, addr: np.ndarray, bad: np.ndarray, programs: np.ndarray, itemsize: int) -> None:
        """Count every bad element (vectorised: a batched launch may bring millions) and
        keep the first ``DETAILED_FINDINGS`` in full."""
        rep = self.report
        progs = np.broadcast_to(programs, addr.shape + (3,))
        where = np.argwhere(bad) if addr.ndim else np.zeros((1, 0), dtype=np.int64)
        at = tuple(where.T) if addr.ndim else ()
        bad_addr = addr[at].reshape(-1)
        bad_progs = progs[at].reshape(-1, 3)
        # Distance of each bad address to each region (0 when it starts inside one and
        # runs over its end); the nearest region names the finding.
        starts, ends = self._starts[None, :], self._ends[None, :]
        a = bad_addr[:, None]
        gap = np.where(a >= ends, a - ends, np.where(a < starts, starts - a, 0))
        nearest = gap.argmin(axis=1)
        rep.bad_elements += len(bad_addr)
        rep.bad_rows.update(np.unique(bad_progs[:, 0]).tolist())
        for j in np.unique(nearest).tolist():
            key = (kind, kernel, self._regions[j].name)
            hits = nearest == j
            rep.bad_by_group[key] = rep.bad_by_group.get(key, 0) + int(hits.sum())
            rep.rows_by_group.setdefault(key, set()).update(np.unique(bad_progs[hits, 0]).tolist())

        room = DETAILED_FINDINGS - len(rep.findings)
        # Past the room, still the first element of each group not yet detailed (a store
        # past one tensor after twenty loads past another is named all the same).
        have = {(f.kind, f.kernel, f.nearest) for f in rep.findings}
        firsts = [int(np.argmax(nearest == j)) for j in np.unique(nearest).tolist()
                  if (kind, kernel, self._regions[j].name) not in have]
        chosen = sorted(set(range(min(max(room, 0), len(bad_addr)))) | set(firsts))
        if not chosen:
            return
        width = addr.shape[-1] if addr.ndim else 1
        # A last axis of several elements of one program is a block of columns (module doc).
        last_axis_is_columns = width > 1 and bool((progs == progs[..., :1, :]).all())
        for n in chosen:
            program = tuple(int(v) for v in bad_progs[n])
            address, region = int(bad_addr[n]), self._regions[int(nearest[n])]
            if address >= region.end:
                after, before = address - region.end, -1
            elif address < region.start:
                after, before = -1, region.start - address
            else:  # starts inside, runs over the end
                after, before = 0, -1
            col = program[1] * width + int(where[n][-1]) if last_axis_is_columns else -1
            rep.findings.append(
                Finding(rep.label, kernel, kind, program[0], col, program, address, itemsize,
                        region.name, after, before, region.numel, region.itemsize)
            )


_active: Session | None = None


def active() -> Session | None:
    """The session checking accesses now, or None when memcheck is off."""
    return _active


@contextlib.contextmanager
def watching(tensors: dict | None = None, kernel_label: str = "kernel") -> Iterator[Session]:
    """Within this block every interpreted launch is memory-checked; yields the
    ``Session`` whose ``report`` holds what was seen.

    ``tensors`` (optional): tensors the caller knows by name (the case's inputs), used
    only to name what a kernel argument is; the bounds are always those of the
    launch's own tensor arguments. ``kernel_label`` names the implementation in
    findings. Needs the interpreter (``TRITON_INTERPRET=1``, ``runtime.select('cpu')``)."""
    global _active
    if _active is not None:
        raise InternalError("memcheck.watching is already active; it does not nest")
    from triton.runtime import interpreter

    session = Session(kernel_label, tensors)
    builder = interpreter.interpreter_builder
    hooks = _builder_hooks(builder, session)
    saved = {name: builder.__dict__.get(name, _MISSING) for name in hooks}
    executor = interpreter.GridExecutor
    original_init_args = executor._init_args_hst

    def init_args_hst(self, args_dev, kwargs):
        args_hst, kwargs_hst = original_init_args(self, args_dev, kwargs)
        named = inspect.getcallargs(self.fn, *args_hst, **kwargs_hst)
        session.begin_launch(getattr(self.fn, "__name__", "kernel"), named)
        return args_hst, kwargs_hst

    _active = session
    for name, hook in hooks.items():
        setattr(builder, name, hook)
    executor._init_args_hst = init_args_hst
    try:
        yield session
    finally:
        executor._init_args_hst = original_init_args
        for name, value in saved.items():
            if value is _MISSING:
                builder.__dict__.pop(name, None)
            else:
                setattr(builder, name, value)
        _active = None


_MISSING = object()


def _builder_hooks(builder, session: Session) -> dict:
    """Replacements for the builder's memory operations that check, then mask off the
    out-of-bounds elements and run the original."""
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    load, store = builder.create_masked_load, builder.create_masked_store
    rmw, cas = builder.create_atomic_rmw, builder.create_atomic_cas

    def programs_of(shape):
        return np.broadcast_to(np.asarray(builder.grid_idx, dtype=np.int64), tuple(shape) + (3,))

    def check(kind, ptrs, mask):
        addr = ptrs.data.astype(np.int64)
        size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        return session.access(kind, addr, mask, programs_of(addr.shape), itemsize=size)

    def narrowed(ok, mask):
        # Compare with `is`, never truth: a TensorHandle's bool() is "all elements true".
        if np.array_equal(ok, np.broadcast_to(mask.data, ok.shape)):
            return mask
        return TensorHandle(ok, tl.int1)

    def create_masked_load(ptrs, mask, other, cache_modifier, eviction_policy, is_volatile):
        ok = check("load", ptrs, mask.data)
        return load(ptrs, narrowed(ok, mask), other, cache_modifier, eviction_policy, is_volatile)

    def create_masked_store(ptrs, value, mask, cache_modifier, eviction_policy):
        ok = check("store", ptrs, mask.data)
        return store(ptrs, value, narrowed(ok, mask), cache_modifier, eviction_policy)

    def create_atomic_rmw(rmwOp, ptr, val, mask, sem, scope):
        ok = check("atomic", ptr, mask.data)
        return rmw(rmwOp, ptr, val, narrowed(ok, mask), sem, scope)

    def create_atomic_cas(ptr, cmp, val, sem, scope):
        ok = check("atomic", ptr, np.ones(ptr.data.shape, dtype=bool))
        if ok.all():
            return cas(ptr, cmp, val, sem, scope)
        # No mask to narrow: run the in-bounds elements alone, the others return 0.
        result = np.zeros(np.shape(cmp.data), dtype=cmp.data.dtype)
        if ok.any():
            sub = cas(TensorHandle(ptr.data[ok], ptr.dtype), TensorHandle(cmp.data[ok], cmp.dtype),
                      TensorHandle(val.data[ok], val.dtype), sem, scope)
            result[ok] = sub.data
        return TensorHandle(result, cmp.dtype.scalar)

    return {
        "create_masked_load": create_masked_load,
        "create_masked_store": create_masked_store,
        "create_atomic_rmw": create_atomic_rmw,
        "create_atomic_cas": create_atomic_cas,
    }


# --------------------------------------------------------------------------- regions


def _is_tensor(value) -> bool:
    return hasattr(value, "data_ptr") and hasattr(value, "element_size")


def _regions(tensors: dict, strip_ptr: bool = False) -> list[Region]:
    """One region per distinct byte span; several names for one span are aliases
    (a wrapper passing ``out`` for an unused pointer argument)."""
    spans: dict = {}
    for name, t in tensors.items():
        if t is None or not _is_tensor(t):
            continue
        t = getattr(t, "base", t) if type(t).__name__ == "TensorWrapper" else t
        label = name[: -len("_ptr")] if strip_ptr and name.endswith("_ptr") else name
        start, end = _extent(t)
        key = (start, end)
        if key in spans:
            spans[key] = Region(spans[key].names + (label,), start, end, spans[key].itemsize, spans[key].numel)
        else:
            spans[key] = Region((label,), start, end, t.element_size(), t.numel())
    return list(spans.values())


def _extent(t) -> tuple[int, int]:
    """``[first byte, one past the last byte)`` of the elements a (strided) tensor
    views. Gaps between the rows of a strided view count as inside: the check is
    about leaving the tensor, not about striding within it."""
    base, size = t.data_ptr(), t.element_size()
    if t.numel() == 0:
        return base, base
    low = sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if s < 0)
    high = sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if s > 0)
    return base + low * size, base + (high + 1) * size
