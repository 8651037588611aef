"""Every error remap-ab raises on purpose.

Each one carries a single line that says what is wrong and what to do about it; the
command line prints that line and exits with status 2, never a traceback.
"""


class RemapABError(Exception):
    """Base class: a problem the user can fix, described in one line."""

    exit_code = 2

    def __init__(self, message: str):
        # One line, always: a newline here would split the user-facing message.
        super().__init__(" ".join(str(message).split()))


class ConfigError(RemapABError):
    """A case configuration that makes no sense (e.g. DCP rank >= DCP size)."""


class InputError(RemapABError):
    """Input tensors that do not satisfy the kernels' contract (dtype, shape)."""


class ImplementationError(RemapABError):
    """An implementation name that cannot be imported or lacks the SPEC §1 API."""


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


def exception_line(exc: BaseException) -> str:
    """``"TypeName: message"`` on one line: how a caught exception is recorded in a
    verdict, a results row or a crash report."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
