"""A file loaded at a git revision (``REV:PATH``, sources.py) imports its package's
siblings from that same revision, never from the working tree: relative imports and the
absolute ones of its own top package. The Source's sha256 covers every file loaded; a
directory as PATH is a one-line error naming a file to give instead; and in a process
remap-ab did not start, the import system is left as it was found.

The repository (built here): ``pkg/helper.py``'s VALUE is 1 at the tag ``one``, 2 at
``two``, and 3 in the working tree (not committed); ``pkg/impl.py`` is the same file at
both commits.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest
from conftest import git

from remap_ab import sources
from remap_ab.errors import ImplementationError
from remap_ab.host import tuning
from remap_ab.subjects.remap.judge import registry

IMPL = """\
from . import helper
from pkg import helper as absolute
from pkg.kernel import triton_convert_req_index_to_global_index, triton_filter_and_convert_dcp_index


def values():
    return helper.VALUE, absolute.VALUE, helper is absolute
"""
KERNEL = """\
from .helper import VALUE


def triton_convert_req_index_to_global_index(*args, **kwargs):
    return VALUE


def triton_filter_and_convert_dcp_index(*args, **kwargs):
    return VALUE
"""


@pytest.fixture
def repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "pkg" / "__init__.py").write_text("")
    # Each test's own repository (commits of equal content at the same second would be one).
    (repo / "pkg" / "impl.py").write_text(f"# {tmp_path.name}\n" + IMPL)
    (repo / "pkg" / "kernel.py").write_text(KERNEL)
    for value, tag in ((1, "one"), (2, "two")):
        (repo / "pkg" / "helper.py").write_text(f"VALUE = {value}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", tag)
        git(repo, "tag", tag)
    (repo / "pkg" / "helper.py").write_text("VALUE = 3\n")  # the working tree: never what a revision loads
    return repo


def _blob_sha(repo: Path, rev: str, path: str) -> str:
    import subprocess

    content = subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{path}"], capture_output=True, check=True).stdout
    return hashlib.sha256(content).hexdigest()


def _load(repo: Path, rev: str):
    spec = sources.parse(f"{rev}:pkg/impl.py", str(repo))
    assert spec is not None
    return sources.load(spec)


@pytest.mark.parametrize("rev, value", [("one", 1), ("two", 2)])
def test_siblings_come_from_the_revision(repo, rev, value, monkeypatch):
    monkeypatch.syspath_prepend(str(repo))  # the working tree's pkg is importable: it must not be the one used
    module, source = _load(repo, rev)
    assert module.values() == (value, value, True)
    assert module.triton_convert_req_index_to_global_index() == value
    # Every file executed, the named one first, each with its blob's sha256; the digest covers them all.
    entries = [e.strip() for e in source.files.split(",")]
    paths = [e.split(" ")[0] for e in entries]
    assert paths[0] == "pkg/impl.py" and set(paths) == {"pkg/impl.py", "pkg/__init__.py", "pkg/helper.py",
                                                        "pkg/kernel.py"}
    assert all(e.split(" ")[1] == _blob_sha(repo, rev, e.split(" ")[0]) for e in entries)
    assert source.sha256 == hashlib.sha256("\n".join(entries).encode()).hexdigest()
    assert "over the 4 files loaded from that commit" in source.line() and "pkg/helper.py" in source.line()


def test_the_digest_tells_two_revisions_apart_whose_named_file_is_the_same(repo):
    assert _blob_sha(repo, "one", "pkg/impl.py") == _blob_sha(repo, "two", "pkg/impl.py")
    assert _load(repo, "one")[1].sha256 != _load(repo, "two")[1].sha256


def test_the_registry_takes_an_implementation_whose_functions_live_in_a_sibling(repo):
    impl = registry.get("one:pkg/impl.py", repo=str(repo))
    assert impl.module.triton_convert_req_index_to_global_index() == 1
    assert impl.source.files and "pkg/kernel.py" in impl.source.files
    again = registry.get(impl.name, repo=str(repo))  # the canonical name: the cached module, the same Source
    assert again.source == impl.source


def test_a_guest_process_keeps_its_import_system(repo, monkeypatch):
    monkeypatch.setattr(tuning, "_owned", False)
    meta_path, modules = list(sys.meta_path), set(sys.modules)
    module, _ = _load(repo, "one")
    assert sys.meta_path == meta_path
    assert {n for n in set(sys.modules) - modules if not n.startswith("_remap_ab_impl_")} == set()
    assert module.values() == (1, 1, True)  # the siblings stay reachable from the module


def test_a_process_of_remap_abs_own_keeps_the_revision_modules(repo, monkeypatch):
    monkeypatch.setattr(tuning, "_owned", True)
    meta_path = list(sys.meta_path)
    _load(repo, "two")
    assert sys.meta_path == meta_path  # the finder is there only while an import runs
    commit = git(repo, "rev-parse", "two").strip()
    assert f"{sources.REVISION_PACKAGE}{commit[:sources.SHORT]}.pkg.helper" in sys.modules


def test_a_directory_says_it_is_one_and_what_to_give(repo):
    with pytest.raises(ImplementationError) as caught:
        sources.parse("two:pkg", str(repo))
    message = str(caught.value)
    assert "\n" not in message
    assert "pkg is a directory at revision two" in message and "not a file" in message
    assert "it holds helper.py, impl.py, kernel.py" in message and "e.g. two:pkg/helper.py" in message


def test_a_file_without_a_package_still_loads(repo):
    (repo / "top.py").write_text("VALUE = 7\n")
    git(repo, "add", "top.py")
    git(repo, "commit", "-q", "-m", "top")
    module, source = sources.load(sources.parse("HEAD:top.py", str(repo)))
    assert module.VALUE == 7 and source.files is None
    assert source.sha256 == hashlib.sha256(b"VALUE = 7\n").hexdigest()


def test_a_directory_on_the_command_line_is_one_line_exit_2(repo, capsys):
    from remap_ab.cli import main as cli_main

    assert cli_main(["run", "--repo", str(repo), "--a", "two:pkg", "--b", "new", "--tokens", "1", "--topk", "128",
                     "--device", "cpu"]) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert "pkg is a directory at revision two" in lines[0] and "e.g. two:pkg/helper.py" in lines[0]
