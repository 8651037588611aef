"""Memory checking on a GPU: the implementations run under ``compute-sanitizer --tool
memcheck`` in a child process, and its findings become the same ``Check.MEMCHECK``
verdict as the CPU check (memcheck.py).

Why a child process: the sanitizer instruments a whole process from its start. Why
``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` in it: with PyTorch's caching allocator on, a small
tensor lives inside a larger cached block, so a read one element past its end lands in
memory the process owns and the sanitizer sees nothing (measured on an H200: a 4-byte
read past a 16-byte block table is reported only with caching off). With caching off
every tensor is its own allocation and the sanitizer's "nearest allocation" is the
tensor itself; the child prints each tensor's address so that findings can name it.

What the sanitizer cannot give: the column. It reports a thread of a block, and how a
Triton kernel spreads a row's elements over threads depends on the compiled layout; the
row is the block's x index (the kernels' grid is (rows, tiles)), the column is left
-1 and the thread is quoted.

One child checks a whole batch and places each finding in its case without another
child: the child keeps every case's tensors alive, so an allocation address belongs to
one case and the finding's "nearest allocation" names it; a finding without an address
goes to the case whose mark precedes it. The child runs with
``--destroy-on-device-error kernel`` (a faulting kernel is ended, the context lives
on), so the cases after a finding are still checked in the same child; if the context
was lost anyway, the cases that did not run go to a fresh child, and only a finding
that no case can claim falls back to one child per case.

Never clean by default: a missing sanitizer, a refused device, a run without the
sanitizer's "ERROR SUMMARY" line or a child that did not finish every case raise
``SanitizerError`` (one line, exit 2).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from remap_ab.errors import SanitizerError
from remap_ab.sanitizer.memcheck import DETAILED_FINDINGS, Finding, MemcheckReport

SOURCE = "compute-sanitizer"
CASE_MARK = "REMAP-AB-SANITIZER-CASE"
TENSOR_MARK = "REMAP-AB-SANITIZER-TENSOR"
DONE_MARK = "REMAP-AB-SANITIZER-DONE"
# Where the child is, with seconds since it started: a child past its time is quoted by
# its last line, so these say which step it was stuck in (imports, CUDA, a compile, a case).
STAGE_MARK = "REMAP-AB-SANITIZER-STAGE"
READY = "CUDA ready"
DEFAULT_TIMEOUT_S = 900.0
# On an H200, now and then a child hung inside CUDA's initialisation under the sanitizer
# (torch.cuda.is_available(), with no other sanitizer running: see docs/memcheck.md). A
# start normally takes seconds; one that has not reached READY by then is restarted once.
START_TIMEOUT_S = 90.0
# The child prints its Python stack this long after it started if it has not reached READY.
STACK_AFTER_S = START_TIMEOUT_S - 10.0


def find_sanitizer() -> str:
    """The compute-sanitizer executable: on PATH, else under $CUDA_HOME/bin or
    /usr/local/cuda/bin; ``SanitizerError`` when there is none."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            candidate = Path(root) / "bin" / "compute-sanitizer"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    raise SanitizerError(
        "--memcheck on a GPU needs compute-sanitizer, found neither on PATH nor under $CUDA_HOME/bin or "
        "/usr/local/cuda/bin; nothing was checked (install it, or run --memcheck --device cpu)"
    )


def command(sanitizer: str, payload: Path) -> list[str]:
    """The child's command line (also printed for the user to rerun by hand)."""
    return [
        sanitizer, "--tool", "memcheck", "--target-processes", "application-only", "--print-limit", "1000",
        # A faulting kernel is ended without destroying the context: the batch's later
        # cases still run (and are checked) in this child.
        "--destroy-on-device-error", "kernel",
        sys.executable, "-m", "remap_ab.processes.memcheck_child", str(payload),
    ]


def child_environment() -> dict:
    env = dict(os.environ)
    env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"  # see the module docstring
    env.pop("TRITON_INTERPRET", None)
    # The child imports implementations exactly as this process does.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def check_cases(impl_name: str, configs: list, inputs: list, *, child: str,
                timeout_s: float = DEFAULT_TIMEOUT_S) -> list[MemcheckReport]:
    """Every case of ``configs`` through ``impl_name`` under the sanitizer: one child
    for the batch, each finding placed in its case (module docstring). ``child``
    ("module:function") is the subject's function that runs the cases in the child
    (``processes/memcheck_child.py``). Cases the child could not check (the context was
    lost after a finding) go to a fresh child with the rest; a finding no case claims
    makes every case of that child run alone."""
    reports: list = [None] * len(configs)
    todo = list(range(len(configs)))
    while todo:
        found = _run_child(impl_name, [configs[i] for i in todo], [inputs[i] for i in todo], timeout_s, child=child)
        if found.unplaced:
            for i in todo:
                reports[i] = _run_child(impl_name, [configs[i]], [inputs[i]], timeout_s, child=child).reports[0]
            break
        for j, i in enumerate(todo):
            if j not in found.unchecked:
                reports[i] = found.reports[j]
        rest = [todo[j] for j in sorted(found.unchecked)]
        if len(rest) == len(todo):
            raise SanitizerError(f"compute-sanitizer checked none of {len(todo)} cases of {impl_name} "
                                 f"({found.reports[0].detail}); nothing was checked")
        todo = rest
    return reports


def check_case(impl_name: str, config, inputs, *, child: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> MemcheckReport:
    return check_cases(impl_name, [config], [inputs], child=child, timeout_s=timeout_s)[0]


class _StartStalled(Exception):
    """The child did not reach ``READY`` in time; carries its last output line."""


def _run_child(impl_name: str, configs: list, inputs: list, timeout_s: float,
               start_timeout_s: float = START_TIMEOUT_S, *, child: str) -> Localised:
    import torch

    sanitizer = find_sanitizer()
    device_index = inputs[0].device.index or 0
    restarted = ""
    with tempfile.TemporaryDirectory(prefix="remap-ab-sanitizer-") as folder:
        payload = Path(folder) / "cases.pt"
        torch.save(
            {
                "impl": impl_name,
                "child": child,
                "device_index": device_index,
                "cases": [(c.to_dict(), {k: t.cpu() for k, t in x.tensors().items()}) for c, x in zip(configs, inputs)],
            },
            payload,
        )
        cmd = command(sanitizer, payload)
        try:
            stdout, stderr = _run_to_the_end(cmd, timeout_s, start_timeout_s)
        except _StartStalled as first:
            # Nothing of the kernels has run yet, so a second start checks everything.
            restarted = f"restarted once: the first start did not get CUDA within {start_timeout_s:.0f} s ({first})"
            try:
                stdout, stderr = _run_to_the_end(cmd, timeout_s, start_timeout_s)
            except _StartStalled as second:
                raise SanitizerError(
                    f"compute-sanitizer's child did not get CUDA within {start_timeout_s:.0f} s, twice (its last "
                    f"line: {second}); nothing was checked (a GPU driver or sanitizer problem: see docs/memcheck.md)"
                ) from None
    found = localised(stdout + "\n" + stderr, impl_name, len(configs))
    if restarted:
        for report in found.reports:
            report.detail = f"{report.detail}; {restarted}"
    return found


def _run_to_the_end(cmd: list, timeout_s: float, start_timeout_s: float) -> tuple[str, str]:
    """Run the sanitizer and its child in a session of their own and return their
    output. The whole session is killed when the child has not printed ``READY`` within
    ``start_timeout_s`` (``_StartStalled``), when it runs past ``timeout_s``
    (``SanitizerError``), or when we are interrupted. Killing compute-sanitizer alone
    left the instrumented Python behind, an orphan holding a context on the GPU (seen on
    an H200)."""
    proc = subprocess.Popen(cmd, env=child_environment(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    said: list[str] = []
    errors: list[str] = []
    ready = threading.Event()
    readers = [
        threading.Thread(target=_drain, args=(proc.stdout, said, ready), daemon=True),
        threading.Thread(target=_drain, args=(proc.stderr, errors, None), daemon=True),
    ]
    for reader in readers:
        reader.start()

    started = time.monotonic()
    try:
        while proc.poll() is None:
            waited = time.monotonic() - started
            if waited > timeout_s:
                _kill_session(proc)
                raise SanitizerError(
                    f"compute-sanitizer did not finish within {timeout_s:.0f} s (its last line: {_last_line(said)[:160]}); "
                    "nothing was checked"
                )
            if waited > start_timeout_s and not ready.is_set():
                _kill_session(proc)
                raise _StartStalled(f"{_last_line(said)[:160]}{_stalled_frame(errors)}")
            time.sleep(0.1)
    finally:
        if proc.poll() is None:  # interrupted (Ctrl-C, a test's time limit): leave nothing running
            _kill_session(proc)
        proc.wait()
        for reader in readers:
            reader.join(timeout=10)  # a descendant that escaped every kill may hold a pipe open
    return "".join(said), "".join(errors)


def _stalled_frame(errors: list[str]) -> str:
    """The innermost frame of the stack the child printed at ``STACK_AFTER_S``
    (faulthandler lists the most recent call first), as "; stuck in ..."; "" when none."""
    frames = [ln.strip() for ln in "".join(errors).splitlines() if ln.strip().startswith("File ")]
    return f"; stuck in {frames[0][:200]}" if frames else ""


def _last_line(lines) -> str:
    """The last line with something on it, stripped; "no output" when there is none."""
    return next((ln.strip() for ln in reversed(list(lines)) if ln.strip()), "no output")


def _drain(stream, lines: list, ready: threading.Event | None) -> None:
    for line in stream:
        lines.append(line)
        if ready is not None and line.startswith(STAGE_MARK) and line.rstrip().endswith(READY):
            ready.set()
    stream.close()


def _kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL the sanitizer's process group and, in case a launcher moved to a group of
    its own, every process descended from it (found in /proc before the first kill)."""
    family = _descendants(proc.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in family:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # "pid (comm) state ppid ...": comm may hold spaces, so split after its ")".
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


# --------------------------------------------------------------------------- parsing

_ACCESS = re.compile(r"Invalid (__\w+__) (read|write|atomic)\w* of size (\d+) bytes?")
_AT = re.compile(r"^\s*at (.+)$")
_THREAD = re.compile(r"by thread \((\d+),\s*(\d+),\s*(\d+)\) in block \((\d+),\s*(\d+),\s*(\d+)\)")
# "Address 0x.. is out of bounds" in the tool's documentation; "Access to 0x.. is out of
# bounds" is what compute-sanitizer 2025.3.1 (CUDA 13.0) printed on the H200, 2026-11-30.
_ADDRESS = re.compile(r"(?:Address|Access to) (0x[0-9a-fA-F]+)")
_NEAREST = re.compile(
    r"and is ([\d,]+) bytes (after|before) the nearest allocation at (0x[0-9a-fA-F]+) of size ([\d,]+) bytes"
)
_INSIDE = re.compile(r"is inside the nearest allocation at (0x[0-9a-fA-F]+) of size ([\d,]+) bytes")
_SUMMARY = re.compile(r"ERROR SUMMARY: ([\d,]+) errors?")
_PREFIX = re.compile(r"^=========\s?")
_KIND = {"read": "load", "write": "store", "atomic": "atomic"}
_REFUSED = ("Device not supported", "device is not supported", "Unable to find injection library", "not supported on this device")


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def kernel_name(location: str) -> str:
    """The kernel in a sanitizer ``at ...`` line, in either of its spellings:
    ``kern+0x1b0 in file.py:84`` or ``0x1b0 in file.cu:10:kern(int*)``."""
    left, _, right = location.partition(" in ")
    if not left.startswith("0x"):
        return re.split(r"[+(]", left.strip(), maxsplit=1)[0] or left.strip()
    tail = right.rsplit(":", 1)[-1] if right else left
    return re.split(r"\(", tail.strip(), maxsplit=1)[0] or location.strip()


@dataclass
class Localised:
    """What one child's output says, case by case: a report per case (its own findings
    only), the cases it did not get to check, and whether a finding could not be
    placed in any case."""

    reports: list
    unchecked: set = field(default_factory=set)
    unplaced: bool = False


def reports_from_output(text: str, impl_name: str, n_cases: int) -> list[MemcheckReport]:
    """The child's combined output → one report per case (``localised``)."""
    return localised(text, impl_name, n_cases).reports


def localised(text: str, impl_name: str, n_cases: int) -> Localised:
    """The child's combined output (sanitizer lines and the child's marks) → each
    finding in its case; ``SanitizerError`` when it shows that nothing was (fully)
    checked."""
    lines = text.splitlines()
    refused = next((ln for ln in lines if any(r in ln for r in _REFUSED)), None)
    if refused is not None:
        raise SanitizerError(f"compute-sanitizer cannot check this GPU ({_PREFIX.sub('', refused).strip()}); nothing was checked")
    summary = next((m for m in map(_SUMMARY.search, lines) if m), None)
    if summary is None:
        last = _last_line(lines)
        raise SanitizerError(f"compute-sanitizer ended without its error summary ({last[:200]}); nothing was checked")
    done = any(ln.startswith(DONE_MARK) for ln in lines)
    errors = _int(summary.group(1))
    if not done and errors == 0:
        last = _last_line(ln for ln in lines if not _SUMMARY.search(ln))
        raise SanitizerError(f"the sanitized run stopped before finishing its cases ({last[:200]}); nothing was checked")
    marks = _CaseMarks(lines)
    if marks.raised and errors == 0:
        # The kernel did not run to the end, and the sanitizer saw nothing: not clean.
        what = next(iter(marks.raised.values()))
        raise SanitizerError(f"{impl_name} raised in the sanitized run ({what[:200]}); nothing was checked")

    accesses, other = _findings(lines, impl_name, marks.tensors)
    placed = [(at, f, alloc) for at, f, alloc in accesses]
    if not placed and errors:
        # Errors that are no access report (a launch failure alone): still a failure.
        placed = [(at, _error_finding(impl_name, line), None) for at, line in other or [(len(lines), summary.group(0))]]
    owned: list[list] = [[] for _ in range(n_cases)]
    unplaced = False
    for at, f, alloc in placed:
        k = 0 if n_cases == 1 else marks.owner(at, alloc)
        if k is None or not 0 <= k < n_cases:
            unplaced = True
        else:
            owned[k].append(f)
    reports = []
    for mine in owned:
        report = MemcheckReport(impl_name, launches=1, source=SOURCE, detail=summary.group(0))
        if errors and n_cases > 1:
            report.detail = f"{summary.group(0)} in a batch of {n_cases} cases, {len(mine)} in this one"
        for f in mine:
            _add(report, f)
        reports.append(report)
    # A case without a finding of its own is checked if it ran to its end without
    # raising; one that raised or never ran (the context lost at an earlier finding)
    # goes to a fresh child.
    unchecked = {k for k in range(n_cases) if not owned[k] and (k in marks.raised or not marks.ran(k, done))}
    return Localised(reports, unchecked, unplaced)


class _CaseMarks:
    """The child's per-case marks: where each case starts in the output, which ran or
    raised, and the case and name of every allocation it printed."""

    def __init__(self, lines: list):
        self.starts: dict[int, int] = {}  # case -> line of its mark
        self.raised: dict[int, str] = {}
        self.finished: set[int] = set()
        self.tensors: dict[int, tuple] = {}  # address -> (name, bytes, case)
        case = -1
        for i, ln in enumerate(lines):
            if ln.startswith(CASE_MARK):
                head, sep, what = ln.partition(" raised: ")
                k = int(head.split()[1])
                if sep:
                    self.raised[k] = what
                else:
                    self.starts.setdefault(k, i)
                    case = k
            elif ln.startswith(TENSOR_MARK):
                _, name, ptr, nbytes = ln.split()
                self.tensors[int(ptr, 0)] = (name, int(nbytes), case)
            elif ln.startswith(STAGE_MARK) and (m := re.search(r": case (\d+) ran$", ln.rstrip())):
                self.finished.add(int(m.group(1)))

    def ran(self, k: int, done: bool) -> bool:
        """Case ``k`` started and got to its end (a later case started, or all did)."""
        return k in self.starts and (k in self.finished or done or any(j > k for j in self.starts))

    def owner(self, line: int, allocation: int | None) -> int | None:
        """The case a finding at ``line`` belongs to: the case of the allocation it
        names (every case's tensors stay alive, so an address is one case's) unless
        that case starts after the finding in the output; else the case whose mark
        last precedes it; None when there is neither."""
        before = [k for k, i in self.starts.items() if i < line]
        positional = max(before, key=self.starts.__getitem__) if before else None
        held = self.tensors.get(allocation) if allocation is not None else None
        if held is not None and held[2] >= 0 and (positional is None or self.starts[held[2]] <= self.starts[positional]):
            return held[2]
        return positional


def _findings(lines: list, impl_name: str, tensors: dict) -> tuple[list, list]:
    """Access errors as (line, Finding, allocation address or None), and (line, first
    line) of every other error."""
    findings, other = [], []
    i = 0
    while i < len(lines):
        body = _PREFIX.sub("", lines[i]) if lines[i].startswith("=========") else None
        m = _ACCESS.search(body) if body is not None else None
        if m is None:
            if body is not None and re.match(r"\s*(Program hit|Invalid|Misaligned|Out-of-range|Malformed|Unspecified)", body):
                other.append((i, body.strip()))
            i += 1
            continue
        block: list[str] = []  # the report's lines after the access line
        j = i + 1
        while j < len(lines) and lines[j].startswith("=========") and _PREFIX.sub("", lines[j]).strip():
            block.append(_PREFIX.sub("", lines[j]))
            if _ACCESS.search(block[-1]):
                break
            j += 1
        findings.append((i, *_access_finding(m, block, impl_name, tensors)))
        i = j
    return findings, other


def _access_finding(m, body: list, impl_name: str, tensors: dict) -> tuple[Finding, int | None]:
    space, kind, size = m.group(1), _KIND[m.group(2)], int(m.group(3))
    kernel, thread, block, address = "an unnamed kernel", None, (-1, -1, -1), -1
    alloc = None
    for ln in body:
        if (at := _AT.match(ln)) and kernel == "an unnamed kernel":
            kernel = kernel_name(at.group(1))
        if t := _THREAD.search(ln):
            thread, block = tuple(map(int, t.group(1, 2, 3))), (int(t.group(4)), int(t.group(5)), int(t.group(6)))
        if a := _ADDRESS.search(ln):
            address = int(a.group(1), 16)
        if n := _NEAREST.search(ln):
            alloc = (int(n.group(3), 16), _int(n.group(4)))
        if n := _INSIDE.search(ln):
            alloc = (int(n.group(1), 16), _int(n.group(2)))
    note = f"compute-sanitizer: {space} {m.group(2)}" + (f" by thread {thread}" if thread else "")
    if alloc is None or address < 0:
        where = "an unknown allocation"
        return Finding(impl_name, kernel, kind, block[0], -1, block, max(address, 0), size, where, -1, -1, 0, size,
                       note=note + ("" if address >= 0 else "; no address reported")), None
    start, nbytes = alloc
    name, itemsize = tensors.get(start, (f"the allocation of {nbytes} bytes at {start:#x}", None))[0], 4
    end = start + nbytes
    after = address - end if address >= end else (0 if address >= start else -1)
    before = start - address if address < start else -1
    return Finding(impl_name, kernel, kind, block[0], -1, block, address, size, name, after, before,
                   nbytes // itemsize, itemsize, note=note), start


def _error_finding(impl_name: str, line: str) -> Finding:
    return Finding(impl_name, "?", "error", -1, -1, (-1, -1, -1), 0, 0, "?", -1, -1, 0, 1,
                   note=f"compute-sanitizer reported: {line}")


def _add(report: MemcheckReport, f: Finding) -> None:
    report.bad_elements += 1
    report.bad_rows.add(f.row)
    key = (f.kind, f.kernel, f.nearest)
    report.bad_by_group[key] = report.bad_by_group.get(key, 0) + 1
    report.rows_by_group.setdefault(key, set()).add(f.row)
    if len(report.findings) < DETAILED_FINDINGS:
        report.findings.append(f)
