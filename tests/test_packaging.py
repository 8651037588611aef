"""Packaging and the library's manners: what installs, under which names, and that
importing remap_ab leaves its caller's process alone."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

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
    code = ("import os; before = dict(os.environ); import remap_ab, remap_ab.subjects.remap.runner, remap_ab.report; "
            "assert dict(os.environ) == before, set(os.environ.items()) ^ set(before.items()); "
            "assert 'triton' not in __import__('sys').modules")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def _import_graph() -> dict:
    """remap_ab's modules -> the remap_ab modules each imports anywhere in its source
    (function-local and annotation-only imports too: a lazy import is still a dependency)."""
    import ast

    pkg_root = ROOT / "remap_ab"
    modules = {}
    for path in pkg_root.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = set()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):  # imports for annotations too: a circle of types is a circle
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                for a in node.names:
                    full = f"{base}.{a.name}"
                    deps.add(full if full in modules else base)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def test_no_import_cycles_between_modules():
    # runner.py and sanitizer.py used to import each other (the sanitizer's child ran
    # cases through the runner); the child is its own module now.
    graph = _import_graph()
    assert "remap_ab.subjects.remap.runner" not in graph["remap_ab.sanitizer.compute"]
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
