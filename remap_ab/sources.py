"""Implementations from a ``.py`` file or from a file at a git revision (``REV:PATH``).

``parse`` reads what a name points at, without importing it: the file's bytes, and for
``REV:PATH`` the commit the revision resolves to (``git rev-parse``) and the blob at
that commit (``git cat-file``), never checking anything out. ``load`` executes those
exact bytes as a module of its own under a private name (``_remap_ab_impl_<hash>``),
its vLLM import served by vllm_shim.py. A revision's file is written first to a
content-addressed folder under the temporary directory, because Triton reads a
kernel's source from its file.

Canonical names (what run.json, workers, reports and replay use): a file by its
absolute path; a revision as ``REV@SHA12:PATH`` (or ``SHA12:PATH`` when REV was a
commit id), which loads that commit again whatever REV points at later.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import subprocess
import sys
import tempfile
import types
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from remap_ab import vllm_shim
from remap_ab.errors import ImplementationError, UnloadableFileError, exception_line

REPO_VARIABLE = "REMAP_AB_REPO"  # --repo, inherited by worker processes
_PINNED = re.compile(r"^(?P<label>.+)@(?P<hex>[0-9a-f]{7,40})$")
_HEX = re.compile(r"^[0-9a-f]{4,40}$")
SHORT = 12  # hex digits of a commit in a canonical name


@dataclass(frozen=True)
class Source:
    """What was loaded: recorded on the Implementation, in reports, run.json and
    summary.json. ``kind`` "file": ``path`` is the absolute file path; "git": ``path``
    is the path in the repository ``repo`` at ``commit`` (``rev`` as asked)."""

    kind: str
    path: str
    sha256: str
    repo: Optional[str] = None
    rev: Optional[str] = None
    commit: Optional[str] = None

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        """One line for a header: where the bytes came from and their sha256."""
        if self.kind == "git":
            return f"{self.path} at commit {self.commit} ({self.rev}) of {self.repo}, sha256 {self.sha256}"
        return f"{self.path}, sha256 {self.sha256}"


@dataclass(frozen=True)
class Spec:
    """A parsed file or revision name: its canonical name, its bytes and their origin."""

    name: str  # as given
    canonical: str
    content: bytes
    source: Source


def repo_dir(repo: Optional[str] = None) -> str:
    """The repository ``REV:PATH`` names are read from: ``repo``, else $REMAP_AB_REPO,
    else the current directory (absolute)."""
    return os.path.abspath(repo or os.environ.get(REPO_VARIABLE) or os.getcwd())


def looks_like_revision(name: str) -> bool:
    return ":" in name and not Path(name).is_file()


def parse(name: str, repo: Optional[str] = None) -> Optional[Spec]:
    """The Spec of a file or revision name; None for any other name (old, new, oracle,
    a dotted module path). ImplementationError for a file or revision that does not
    exist; UnloadableFileError for a path missing at an existing revision."""
    if Path(name).is_file():
        return _file(name)
    if ":" in name:
        return _revision(name, repo_dir(repo))
    if name.endswith(".py") or "/" in name or os.sep in name:
        return _file(name)
    return None


def _file(name: str) -> Spec:
    path = Path(name).expanduser()
    full = path.resolve()
    if not full.exists():
        raise ImplementationError(
            f"implementation file {name} does not exist (looked for {full}); give the path of a .py file, "
            f"REV:PATH in a git repository, or a dotted module path"
        )
    if not full.is_file():
        raise ImplementationError(f"implementation {name} is a folder ({full}); give the path of a .py file in it")
    try:
        content = full.read_bytes()
    except OSError as exc:
        raise ImplementationError(f"implementation file {name} cannot be read ({exc.strerror})") from None
    digest = hashlib.sha256(content).hexdigest()
    return Spec(name, str(full), content, Source("file", str(full), digest))


def _git(repo: str, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", repo, *args], capture_output=True, timeout=60)
    except FileNotFoundError:
        raise ImplementationError("REV:PATH implementations need git, which is not on PATH; install git") from None


def _revision(name: str, repo: str) -> Spec:
    rev, _, path = name.partition(":")
    if not rev or not path:
        raise ImplementationError(
            f"implementation {name!r}: REV:PATH needs a revision and a path, e.g. main:vllm/v1/attention/backends/mla/sparse_utils.py"
        )
    norm = posixpath.normpath(path.replace(os.sep, "/"))
    if norm.startswith("/") or norm == ".." or norm.startswith("../"):
        raise ImplementationError(f"implementation {name!r}: PATH must be relative to the repository's top folder")
    if not Path(repo).is_dir():
        raise ImplementationError(f"--repo {repo} is not a folder; give the git repository that {name} is read from")
    top = _git(repo, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise ImplementationError(
            f"{repo} is not inside a git repository (needed for {name}); give --repo DIR, a git checkout"
        )
    root = top.stdout.decode().strip()
    pinned = _PINNED.match(rev)
    label, target = (pinned["label"], pinned["hex"]) if pinned else (rev, rev)
    found = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{target}^{{commit}}")
    if found.returncode != 0:
        raise ImplementationError(
            f"revision {target!r} does not exist in the git repository {root} (implementation {name}); "
            f"give a branch, tag or commit of that repository"
        )
    commit = found.stdout.decode().strip()
    blob = _git(root, "cat-file", "blob", f"{commit}:{norm}")
    if blob.returncode != 0:
        raise UnloadableFileError(
            f"{norm} does not exist at revision {label} (commit {commit[:SHORT]}) of {root} (implementation {name}); "
            f"check the path (git ls-tree -r --name-only {commit[:SHORT]})"
        )
    digest = hashlib.sha256(blob.stdout).hexdigest()
    named_by_id = bool(_HEX.match(label)) and commit.startswith(label)
    canonical = f"{commit[:SHORT]}:{norm}" if named_by_id else f"{label}@{commit[:SHORT]}:{norm}"
    source = Source("git", norm, digest, repo=root, rev=label, commit=commit)
    return Spec(name, canonical, blob.stdout, source)


def pinned_name(source: Source, canonical: str) -> str:
    """A revision's name with its full commit: what a replay command passes."""
    if source.kind != "git" or source.commit is None:
        return canonical
    label = source.rev or ""
    if _HEX.match(label) and source.commit.startswith(label):
        return f"{source.commit}:{source.path}"
    return f"{label}@{source.commit}:{source.path}"


def _dotted(path: str) -> Optional[str]:
    """``vllm.a.b`` for a path ending ``.../vllm/a/b.py`` (how the same file is named
    where vLLM is installed)."""
    parts = Path(path).with_suffix("").parts
    if "vllm" not in parts:
        return None
    start = len(parts) - 1 - parts[::-1].index("vllm")
    return ".".join(parts[start:])


def _written(spec: Spec) -> str:
    """The revision's bytes as a file (content-addressed, written once, atomically)."""
    folder = Path(tempfile.gettempdir()) / f"remap-ab-sources-{os.getuid()}" / spec.source.sha256[:16]
    target = folder / posixpath.basename(spec.source.path)
    if target.is_file() and target.read_bytes() == spec.content:
        return str(target)
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(spec.content)
    os.replace(tmp, target)
    return str(target)


def load(spec: Spec) -> tuple[types.ModuleType, Source]:
    """Execute the spec's bytes as a module of its own (once per name and content);
    UnloadableFileError if they do not parse, raise, or import a vLLM module other
    than vllm.triton_utils."""

    filename = spec.source.path if spec.source.kind == "file" else _written(spec)
    key = hashlib.sha256(f"{spec.canonical}\0{spec.source.sha256}".encode()).hexdigest()[:16]
    module_name = f"_remap_ab_impl_{key}"
    if module_name in sys.modules:
        return sys.modules[module_name], spec.source
    try:
        code = compile(spec.content, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise UnloadableFileError(
            f"{spec.canonical} does not parse (line {exc.lineno}: {exc.msg}); fix the file"
        ) from None
    module = types.ModuleType(module_name)
    module.__file__ = filename
    module.__dict__["__builtins__"] = vllm_shim.builtins_for(_dotted(spec.source.path))
    sys.modules[module_name] = module
    try:
        exec(code, module.__dict__)
    except vllm_shim.ForeignVllmImport as exc:
        del sys.modules[module_name]
        raise UnloadableFileError(f"{spec.canonical}{_line_in(exc, filename)} {exc}") from None
    except (Exception, SystemExit) as exc:  # anything the file does while loading is the file's
        del sys.modules[module_name]
        raise UnloadableFileError(
            f"{spec.canonical} failed while loading{_line_in(exc, filename)}: {exception_line(exc)}; fix the file"
        ) from None
    return module, spec.source


def _line_in(exc: BaseException, filename: str) -> str:
    """`` (line N)``: the last line of ``filename`` in the exception's traceback."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return "" if line is None else f" (line {line})"
