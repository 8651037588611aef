"""Implementations from a ``.py`` file or from a file at a git revision (``REV:PATH``).

``parse`` reads what a name points at, without importing it: the file's bytes, and for
``REV:PATH`` the commit the revision resolves to (``git rev-parse``) and the blob at
that commit (``git cat-file``), never checking anything out. ``load`` executes those
exact bytes as a module of its own under a private name (``_remap_ab_impl_<hash>``),
its vLLM import served by vllm_shim.py. A revision's file is written first to a
content-addressed folder under the temporary directory, because Triton reads a
kernel's source from its file.

A revision's file imports its package's siblings from that same commit: its relative
imports (``from . import x``) and the absolute ones of its own top package (``from pkg
import x``, for a file under ``pkg/``) are served from the git tree (``_RevisionFinder``,
a meta-path finder reading ``git cat-file``), as modules under the private package
``_remap_ab_rev_<commit>``, never the working tree's. The finder sits on
``sys.meta_path`` only while such an import runs; in a process remap-ab did not start
the siblings leave ``sys.modules`` as well once the import is done. The Source's
sha256 then covers every file loaded (``Source.files``).

Canonical names (what run.json, workers, reports and replay use): a file by its
absolute path; a revision as ``REV@SHA12:PATH`` (or ``SHA12:PATH`` when REV was a
commit id), which loads that commit again whatever REV points at later.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.abc
import importlib.util
import os
import posixpath
import re
import subprocess
import sys
import tempfile
import types
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from remap_ab import vllm_shim
from remap_ab.errors import ImplementationError, UnloadableFileError, exception_line
from remap_ab.host import tuning

REPO_VARIABLE = "REMAP_AB_REPO"  # --repo, inherited by worker processes
_PINNED = re.compile(r"^(?P<label>.+)@(?P<hex>[0-9a-f]{7,40})$")
_HEX = re.compile(r"^[0-9a-f]{4,40}$")
SHORT = 12  # hex digits of a commit in a canonical name


@dataclass(frozen=True)
class Source:
    """What was loaded: recorded on the Implementation, in reports, run.json and
    summary.json. ``kind`` "file": ``path`` is the absolute file path; "git": ``path``
    is the path in the repository ``repo`` at ``commit`` (``rev`` as asked).
    ``files``: for a revision's file that imported siblings from its commit, every file
    loaded ("PATH SHA256" each, comma-separated, the named file first); ``sha256`` is
    then the sha256 of those entries joined by newlines, not the named file's alone."""

    kind: str
    path: str
    sha256: str
    repo: Optional[str] = None
    rev: Optional[str] = None
    commit: Optional[str] = None
    files: Optional[str] = None

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        """One line for a header: where the bytes came from and their sha256."""
        if self.kind == "git":
            over = ""
            if self.files:
                paths = [entry.strip().rsplit(" ", 1)[0] for entry in self.files.split(",")]
                over = f" over the {len(paths)} files loaded from that commit ({', '.join(paths)})"
            return f"{self.path} at commit {self.commit} ({self.rev}) of {self.repo}, sha256 {self.sha256}{over}"
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
    if blob.returncode != 0 and _object_type(root, commit, norm) == "tree":
        files = _git(root, "ls-tree", "--name-only", f"{commit}:{norm}").stdout.decode().split()
        inside = [f for f in files if f.endswith(".py") and f != "__init__.py"] or files
        example = f"{rev}:{norm}/{inside[0]}" if inside else f"{rev}:{norm}/FILE.py"
        holds = f" (it holds {', '.join(inside[:5])}{', ...' if len(inside) > 5 else ''})" if inside else ""
        raise ImplementationError(
            f"{norm} is a directory at revision {label} (commit {commit[:SHORT]}) of {root} (implementation {name}), "
            f"not a file{holds}; give the .py file inside it that defines the implementation, e.g. {example}"
        )
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


def _object_type(root: str, commit: str, path: str) -> str:
    """``git cat-file -t``: "blob", "tree", or "" where ``path`` is nothing at ``commit``."""
    found = _git(root, "cat-file", "-t", f"{commit}:{path}")
    return found.stdout.decode().strip() if found.returncode == 0 else ""


def _written(content: bytes, digest: str, path: str) -> str:
    """A revision's file as a file (content-addressed, written once, atomically)."""
    folder = Path(tempfile.gettempdir()) / f"remap-ab-sources-{os.getuid()}" / digest[:16]
    target = folder / posixpath.basename(path)
    if target.is_file() and target.read_bytes() == content:
        return str(target)
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(content)
    os.replace(tmp, target)
    return str(target)


# --------------------------------------------------------------------------- a revision's package


REVISION_PACKAGE = "_remap_ab_rev_"  # + the commit's SHORT hex digits: the commit's top folder as a package


class _Tree:
    """One commit's files, read with git as imports ask for them; ``loaded``: each
    file executed as a module ("PATH SHA256"), in order."""

    def __init__(self, repo: str, commit: str):
        self.repo, self.commit = repo, commit
        self.package = f"{REVISION_PACKAGE}{commit[:SHORT]}"
        self.loaded: list[str] = []
        self.depth = 0  # imports through the finder now running (only the outermost cleans up)
        self._types: dict[str, str] = {}

    def kind(self, path: str) -> str:
        if path == "":
            return "tree"
        if path not in self._types:
            self._types[path] = _object_type(self.repo, self.commit, path)
        return self._types[path]

    def blob(self, path: str) -> bytes:
        return _git(self.repo, "cat-file", "blob", f"{self.commit}:{path}").stdout

    def module_of(self, folder: str) -> str:
        """The private package name of ``folder`` (a path in the repository)."""
        return ".".join([self.package, *[p for p in folder.split("/") if p]])


class _RevisionFinder(importlib.abc.MetaPathFinder):
    """Finds ``_remap_ab_rev_<commit>.a.b`` in the commit's tree: ``a/b/__init__.py``
    or ``a/b.py``, or the folder ``a/b`` as a package without a file."""

    def __init__(self, tree: _Tree):
        self.tree = tree

    def find_spec(self, fullname, path=None, target=None):
        tree = self.tree
        if fullname != tree.package and not fullname.startswith(tree.package + "."):
            return None
        rel = "/".join(fullname.split(".")[1:])
        init = posixpath.join(rel, "__init__.py") if rel else "__init__.py"
        if tree.kind(rel) == "tree":
            file = init if tree.kind(init) == "blob" else None
            return importlib.util.spec_from_loader(fullname, _RevisionLoader(tree, file), is_package=True)
        if rel and tree.kind(rel + ".py") == "blob":
            return importlib.util.spec_from_loader(fullname, _RevisionLoader(tree, rel + ".py"), is_package=False)
        return None


class _RevisionLoader(importlib.abc.Loader):
    """Executes one file of the commit (None: a folder without ``__init__.py``)."""

    def __init__(self, tree: _Tree, path: Optional[str]):
        self.tree, self.path = tree, path

    def create_module(self, spec):
        return None  # the default module

    def exec_module(self, module) -> None:
        if self.path is None:
            return
        content = self.tree.blob(self.path)
        digest = hashlib.sha256(content).hexdigest()
        filename = _written(content, digest, self.path)
        module.__file__ = filename
        module.__dict__["__builtins__"] = _builtins(self.tree, self.path)
        self.tree.loaded.append(f"{self.path} {digest}")
        exec(compile(content, filename, "exec", dont_inherit=True), module.__dict__)


@contextlib.contextmanager
def _hooked(tree: _Tree) -> Iterator[None]:
    """The tree's finder first on ``sys.meta_path`` for the block; in a process remap-ab
    did not start, the block's revision modules are dropped from ``sys.modules`` after
    it (a guest leaves the import system as it found it)."""
    if tree.depth:  # inside an import of the same tree: the outer block holds the finder
        yield
        return
    finder = _RevisionFinder(tree)
    before = set(sys.modules)
    sys.meta_path.insert(0, finder)
    tree.depth += 1
    try:
        yield
    finally:
        tree.depth -= 1
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)
        if not tuning.owned():
            for name in [n for n in sys.modules if n not in before and n.startswith(REVISION_PACKAGE)]:
                del sys.modules[name]


def _builtins(tree: Optional[_Tree], path: str) -> dict:
    """The ``__builtins__`` of a loaded file: vllm_shim's, and for a revision's file an
    ``__import__`` that serves the file's package from the commit (the module docstring)."""
    table = vllm_shim.builtins_for(_dotted(path))
    if tree is None:
        return table
    shim_import = table["__import__"]
    parts = path.split("/")
    top = parts[0] if len(parts) > 1 and parts[0] != "vllm" else None  # vllm stays the shim's

    def revision_import(name, globals=None, locals=None, fromlist=(), level=0):
        first = name.split(".")[0]
        if level == 0 and top is not None and first == top:
            with _hooked(tree):
                module = shim_import(f"{tree.package}.{name}", globals, locals, fromlist, 0)
                return module if fromlist else sys.modules[f"{tree.package}.{top}"]
        package = (globals or {}).get("__package__") or ""
        if level and package.startswith(tree.package):
            with _hooked(tree):
                return shim_import(name, globals, locals, fromlist, level)
        return shim_import(name, globals, locals, fromlist, level)

    table["__import__"] = revision_import
    return table


def load(spec: Spec) -> tuple[types.ModuleType, Source]:
    """Execute the spec's bytes as a module of its own (once per name and content);
    UnloadableFileError if they do not parse, raise, or import a vLLM module other
    than vllm.triton_utils."""

    git = spec.source.kind == "git"
    filename = _written(spec.content, spec.source.sha256, spec.source.path) if git else spec.source.path
    key = hashlib.sha256(f"{spec.canonical}\0{spec.source.sha256}".encode()).hexdigest()[:16]
    module_name = f"_remap_ab_impl_{key}"
    if module_name in sys.modules:
        module = sys.modules[module_name]
        return module, getattr(module, "__remap_ab_source__", spec.source)
    try:
        code = compile(spec.content, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise UnloadableFileError(
            f"{spec.canonical} does not parse (line {exc.lineno}: {exc.msg}); fix the file"
        ) from None
    module = types.ModuleType(module_name)
    module.__file__ = filename
    tree = None
    if git:
        assert spec.source.repo is not None and spec.source.commit is not None
        tree = _Tree(spec.source.repo, spec.source.commit)
        tree.loaded.append(f"{spec.source.path} {spec.source.sha256}")
        module.__package__ = tree.module_of(posixpath.dirname(spec.source.path))  # its siblings: the commit's
    module.__dict__["__builtins__"] = _builtins(tree, spec.source.path)
    sys.modules[module_name] = module
    try:
        with _hooked(tree) if tree is not None else contextlib.nullcontext():
            exec(code, module.__dict__)
    except vllm_shim.ForeignVllmImport as exc:
        del sys.modules[module_name]
        raise UnloadableFileError(f"{spec.canonical}{_line_in(exc, filename)} {exc}") from None
    except (Exception, SystemExit) as exc:  # anything the file does while loading is the file's
        del sys.modules[module_name]
        raise UnloadableFileError(
            f"{spec.canonical} failed while loading{_line_in(exc, filename)}: {exception_line(exc)}; fix the file"
        ) from None
    source = spec.source
    if tree is not None and len(tree.loaded) > 1:
        source = dataclasses.replace(source, sha256=hashlib.sha256("\n".join(tree.loaded).encode()).hexdigest(),
                                     files=", ".join(tree.loaded))
    module.__dict__["__remap_ab_source__"] = source
    return module, source


def _line_in(exc: BaseException, filename: str) -> str:
    """`` (line N)``: the last line of ``filename`` in the exception's traceback."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return "" if line is None else f" (line {line})"
