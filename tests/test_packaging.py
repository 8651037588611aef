"""Packaging and the library's manners: what installs, under which names, and that
importing remap_ab leaves its caller's process alone."""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import module_graph

ROOT = Path(__file__).resolve().parent.parent


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_folder_is_installed():
    # The package list is explicit (strategies/ installs under another name), so a
    # new subpackage must be added to it; this names the one that was forgotten.
    tool = _pyproject()["tool"]["setuptools"]
    listed = set(tool["packages"])
    mapped = {folder: name for name, folder in tool["package-dir"].items()}
    found = set()
    for init in ROOT.glob("**/__init__.py"):
        rel = init.parent.relative_to(ROOT)
        if rel.parts[0] in ("tests", "build", ".venv") or rel.parts[0].startswith("."):
            continue
        name = mapped.get(rel.parts[0], rel.parts[0])
        found.add(".".join([name, *rel.parts[1:]]))
    assert found <= listed, f"add {sorted(found - listed)} to [tool.setuptools] packages in pyproject.toml"
    assert "strategies" not in listed and mapped == {"strategies": "remap_ab.strategies"}


def test_python_floor_matches_the_standard_library_used():
    assert _pyproject()["project"]["requires-python"] == ">=3.11"  # tomllib (grid.py) is 3.11+


def test_test_extra_installs_the_ci_tools():
    extra = " ".join(_pyproject()["project"]["optional-dependencies"]["test"])
    for tool in ("pytest", "pytest-xdist", "hypothesis", "ruff", "mypy", "matplotlib"):
        assert tool in extra


def test_import_changes_nothing_in_the_environment():
    # On a CPU machine the interpreter used to be switched on by the import itself.
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "REMAP_AB_PINNED_GPU")}
    code = ("import os; before = dict(os.environ); import remap_ab, remap_ab.subjects.remap.judge.runner, "
            "remap_ab.subjects.remap.report.report; "
            "assert dict(os.environ) == before, set(os.environ.items()) ^ set(before.items()); "
            "assert 'triton' not in __import__('sys').modules")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def _import_graph() -> dict:
    """remap_ab's modules -> the remap_ab modules each imports anywhere in its source
    (function-local and annotation-only imports too: a lazy import is still a dependency)."""
    return module_graph.graph()


def test_no_import_cycles_between_modules():
    # runner.py and sanitizer.py used to import each other (the sanitizer's child ran
    # cases through the runner); the child is its own module now.
    graph = _import_graph()
    assert "remap_ab.subjects.remap.judge.runner" not in graph["remap_ab.sanitizer.compute"]
    state: dict = {}

    def visit(node, path):
        state[node] = "open"
        for dep in sorted(graph[node]):
            if state.get(dep) == "open":
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(dep):] + [dep]))
            if dep not in state:
                visit(dep, path + [dep])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_bench_sits_below_the_command_line():
    # The bench runs its sweep through the sweep's API, never through cli.main.
    graph = _import_graph()
    upward = {(m, d) for m, deps in graph.items() if m.startswith("remap_ab.bench.") for d in deps
              if d == "remap_ab.cli" or d.startswith("remap_ab.commands")}
    assert not upward, f"the bench imports the command line: {sorted(upward)}"


def _local_imports() -> list[tuple[str, int, str]]:
    """Every import of a remap_ab module inside a function: (file, line, the line and
    the one above it)."""
    import ast

    found = []
    for path in sorted((ROOT / "remap_ab").rglob("*.py")):
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        seen = set()
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                ours = any(name.startswith("remap_ab") for name in names)
                if ours and node.lineno not in seen:
                    seen.add(node.lineno)
                    text = "\n".join(lines[max(node.lineno - 2, 0): node.end_lineno])
                    found.append((str(path.relative_to(ROOT)), node.lineno, text))
    return found


def test_function_local_imports_of_remap_ab_are_few_and_each_says_why():
    # An import inside a function hides the module graph; each that stays (an import
    # that would close a cycle, or load pydantic or Triton before they are needed)
    # says why on its line or the line above.
    local = _local_imports()
    unexplained = [f"{f}:{n}" for f, n, text in local if "#" not in text]
    assert not unexplained, f"function-local imports without a reason: {unexplained}"
    assert len(local) <= 40, f"{len(local)} function-local imports of remap_ab modules (at most 40)"


# A local import's reason that says it would close a cycle: the words this project writes.
NAMES_A_CYCLE = re.compile(r"cycle|circular|imports back|imports this (module|package)", re.IGNORECASE)

# Reasons that name a cycle that does not exist, in files this change could not edit:
# (file, imported module). Each fails once corrected, so the list only shrinks.
FALSE_CYCLE_REASONS_KNOWN: set[tuple[str, str]] = set()


def false_cycle_reasons(arrows, module_level: dict, source_of) -> set:
    """(file, imported) of each function-local import whose reason names a cycle that
    importing it at module level would not close: no chain of module-level imports
    leads from the imported module back to the importer. ``source_of(module)`` gives a
    module's (file, lines)."""
    false = set()
    for arrow in arrows:
        if arrow.kind != "local":
            continue
        file, lines = source_of(arrow.importer)
        reason = "\n".join(lines[max(arrow.line - 2, 0): arrow.line])  # its line and the one above
        if NAMES_A_CYCLE.search(reason) and module_graph.path_between(arrow.imported, arrow.importer, module_level) is None:
            false.add((file, arrow.imported))
    return false


def _source_of(module: str) -> tuple[str, list[str]]:
    path = module_graph.modules()[module]
    return str(path.relative_to(ROOT)), path.read_text().splitlines()


def test_every_local_import_that_names_a_cycle_closes_one():
    # "schema imports this module" outlived the import it described four times; a reason
    # that names no cycle ("pydantic is loaded only when a file is read", "keeps
    # remap-ab --help fast") is taken as written.
    false = false_cycle_reasons(module_graph.arrows(), module_graph.graph(("module",)), _source_of)
    new = false - FALSE_CYCLE_REASONS_KNOWN
    assert not new, ("these local imports name a cycle that importing them at module level would not close; "
                     f"import at module level, or write the true reason: {sorted(new)}")
    fixed = FALSE_CYCLE_REASONS_KNOWN - false
    assert not fixed, f"no longer false: remove from FALSE_CYCLE_REASONS_KNOWN: {sorted(fixed)}"


def test_a_false_cycle_reason_is_caught_and_a_true_one_is_not():
    arrows = [module_graph.Arrow("pkg.a", "pkg.b", "local", 2), module_graph.Arrow("pkg.c", "pkg.d", "local", 2)]
    sources = {"pkg.a": ("a.py", ["def f():", "    import pkg.b  # b imports this module"]),
               "pkg.c": ("c.py", ["def g():", "    import pkg.d  # loads Triton late"])}
    assert false_cycle_reasons(arrows, {"pkg.b": set()}, sources.__getitem__) == {("a.py", "pkg.b")}
    # b -> x -> a at module level: the cycle exists, the reason is true
    assert false_cycle_reasons(arrows, {"pkg.b": {"pkg.x"}, "pkg.x": {"pkg.a"}}, sources.__getitem__) == set()
