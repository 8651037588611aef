"""Every error remap-ab raises on purpose, in one flat module.

Two families, kept apart because they mean opposite things:

- ``RemapABError`` and its subclasses: *the user* asked for something that cannot be
  done (a bad option, a corrupt report, a configuration that makes no sense). Each
  carries one line that says what is wrong and what to do; the command line prints it
  and exits with status 2, never a traceback.
- ``InternalError``: *remap-ab itself* broke an invariant (the oracle disagreeing with
  its own reference, a worker pool that cannot start). It is not the user's fault, so
  it never exits 2: the command line prints it with a request to file a bug and exits
  with status 3.

A failing implementation is neither: it is a verdict (status 1), not an exception.
"""


class RemapABError(Exception):
    """Base class: a problem the user can fix, described in one line."""

    exit_code = 2

    def __init__(self, message: str):
        # One line, always: a newline here would split the user-facing message.
        super().__init__(" ".join(str(message).split()))


class ConfigError(RemapABError):
    """A case configuration that makes no sense (e.g. a rank outside the group size it names)."""


class InputError(RemapABError):
    """Input tensors that do not satisfy the kernels' contract (dtype, shape)."""


class ImplementationError(RemapABError):
    """An implementation name that cannot be imported or lacks the SPEC §1 API."""


class UnloadableFileError(ImplementationError):
    """A file or a revision's file named as an implementation (``--a PATH.py``,
    ``--a REV:PATH``) that cannot be loaded: it does not exist at that revision, does
    not parse or raises while loading, imports a vLLM module other than
    ``vllm.triton_utils`` (which needs vLLM itself), or lacks the two SPEC §1 functions.

    Exit 2 like any ImplementationError; under ``--bisect`` exit 125, which ``git bisect
    run`` reads as "this revision cannot be tested". Remedy: the message says which;
    for a vLLM import, install vLLM and name the module by its dotted path."""


class ImplementationOutputError(Exception):
    """An implementation returned something other than the SPEC §1 result: a tensor,
    or a tuple of tensors, as the subject's contract says, on the inputs' device.

    Not a user error and not remap-ab's: the implementation under test is broken, so
    the runner records it as that implementation's ``error`` verdict (exit 1), with
    this message saying what came back. Remedy: fix the implementation's return."""


class ResourceError(RemapABError):
    """A case too large for this machine: its tensors need more memory than is
    available (host RAM for the CPU backend, free GPU memory for cuda). Remedy: the
    message names the limit hit; shrink the case's size fields it names."""


class BackendError(RemapABError):
    """The requested device cannot be used in this process (e.g. cuda without a GPU)."""


class ReportError(RemapABError):
    """A report or run folder that is missing, incomplete or corrupt."""


class NeedsGPUError(RemapABError):
    """A command that only makes sense on a CUDA device was run without one."""


class DisagreementError(RemapABError):
    """Two implementations disagree on the very inputs a command was asked to time."""


class ProfileError(RemapABError):
    """An unknown test profile name, or a profile this machine cannot run."""


class UsageError(RemapABError):
    """A command-line option out of range or in a combination that makes no sense
    (e.g. ``-j -1``, ``--timeout -1``). Remedy: the message names the allowed values."""


class PlotsUnavailable(RemapABError):
    """A picture was asked for but matplotlib, an optional extra, is not installed.

    Cause: remap-ab installed without its ``plots`` extra. Remedy: ``pip install
    'remap-ab[plots]'``. Callers that draw beside a result (reports, bench, nondet)
    catch it and say in one line that there is no picture."""


class MutantError(RemapABError):
    """The seeded-mutant catalogue cannot be used as asked: an unknown mutant id, a
    catalogue entry that is malformed, or a source edit that no longer matches the
    kernel it targets (the kernel was refactored).

    Remedy: the message names the mutant and the field or edit; fix the entry in
    ``remap_ab/subjects/remap/parts/mutants/catalogue.toml`` (``remap-ab mutants --list`` lists the ids)."""


class InternalError(Exception):
    """remap-ab broke one of its own invariants. Not the user's fault: never exit 2.

    Cause: a bug in remap-ab (or in the torch build it runs on). Remedy: file a bug
    with the one-line message and the command that produced it."""

    exit_code = 3

    def __init__(self, message: str):
        super().__init__("internal: " + " ".join(str(message).split()) + " (a remap-ab bug; please report it)")


def exception_line(exc: BaseException) -> str:
    """``"TypeName: message"`` on one line: how a caught exception is recorded in a
    verdict, a results row or a crash report."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


class SanitizerError(RemapABError):
    """GPU ``--memcheck`` could not check anything: compute-sanitizer is not installed
    (neither on PATH nor under $CUDA_HOME/bin or /usr/local/cuda/bin), refuses this GPU
    ("Device not supported"), or stopped before the case finished. Never reported as
    clean. Remedy: install CUDA's compute-sanitizer or put it on PATH, use a GPU it
    supports, or run ``--memcheck --device cpu`` (the interpreter's exact check)."""
