"""remap_ab's import graph, read from the source (ast): every import of a remap_ab module,
with where it runs. Shared by test_packaging.py (cycles, local-import reasons) and
test_layout.py (layers, vocabulary).

An arrow's kind:
    module   runs when the importing module is imported (top level, class bodies, try blocks)
    local    inside a function: runs when the function is called
    typing   under ``if TYPE_CHECKING:``: never runs (annotations only)
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "remap_ab"
KINDS = ("module", "local", "typing")


@dataclass(frozen=True)
class Arrow:
    importer: str  # dotted module names, "remap_ab" for the package's __init__
    imported: str
    kind: str  # one of KINDS
    line: int


@cache
def modules() -> dict[str, Path]:
    """Every module of remap_ab (a package by its own name) -> its file."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(node: ast.Import | ast.ImportFrom, package: str, known: dict) -> list[str]:
    """The remap_ab modules one import statement names (``from P import m`` names P.m
    where that is a module, else P)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in known]
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
    targets = []
    for alias in node.names:
        full = f"{base}.{alias.name}"
        name = full if full in known else base
        if name in known and name not in targets:
            targets.append(name)
    return targets


def _arrows_in(name: str, path: Path, known: dict) -> list[Arrow]:
    """The arrows out of one module, each with the kind of the place it sits in."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Arrow] = []

    def visit(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for stmt in child.body:
                    visit_one(stmt, "typing")
                for stmt in child.orelse:
                    visit_one(stmt, kind)
            else:
                visit_one(child, kind)

    def visit_one(node: ast.AST, kind: str) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.extend(Arrow(name, target, kind, node.lineno) for target in _targets(node, package, known) if target != name)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and kind == "module":
            kind = "local"
        visit(node, kind)

    visit(ast.parse(path.read_text()), "module")
    return found


@cache
def arrows() -> tuple[Arrow, ...]:
    """Every import of a remap_ab module by a remap_ab module (not of itself)."""
    known = modules()
    return tuple(arrow for name, path in known.items() for arrow in _arrows_in(name, path, known))


def graph(kinds: tuple[str, ...] = KINDS) -> dict[str, set[str]]:
    """module -> the modules it imports through arrows of ``kinds``."""
    result: dict[str, set[str]] = {name: set() for name in modules()}
    for arrow in arrows():
        if arrow.kind in kinds:
            result[arrow.importer].add(arrow.imported)
    return result


def path_between(start: str, goal: str, edges: dict[str, set[str]]) -> list[str] | None:
    """A chain of imports from ``start`` to ``goal`` (both included), or None."""
    came_from: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for dep in sorted(edges.get(node, ())):
                if dep in came_from:
                    continue
                came_from[dep] = node
                if dep == goal:
                    chain = [dep]
                    while came_from[chain[-1]] is not None:
                        chain.append(came_from[chain[-1]])  # type: ignore[arg-type]
                    return chain[::-1]
                nxt.append(dep)
        frontier = nxt
    return None
