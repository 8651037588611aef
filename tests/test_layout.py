"""The layout shows the pipeline (issue 42, parts 1 and 5), and the core knows no subject
(issue 61, part 3):

- every module of remap_ab has a layer (the table in docs/layout.md, "Layers"), and no
  import arrow runs from a lower layer to a higher one but those in ``KNOWN_UPWARD``;
- the subjects are the top layer, and every module of a subject's package is in it: no
  module outside ``subjects/`` imports one inside it, of any kind;
- each subject's vocabulary outside its own package is counted per module, and a
  module's count stays at its line in ``VOCABULARY_CEILING``;
- the remap's folders are its layers (issue 61, part 5; docs/layout.md, "The remap's
  layers"): every folder is one layer, no import runs up from one to another, and no
  test file ships inside remap_ab.

Both ratchets are at zero and must stay there: a new arrow or word fails, and so does a
line added to either table (``--write`` would add one). A listed arrow that is gone or
a count that dropped fails too, so the tables stay the truth. ``python tests/test_layout.py`` prints the layers'
arrows, the vocabulary per module and package, and the lines per package;
``python tests/test_layout.py --write`` rewrites the two tables below from the tree
(a kept arrow keeps its comment).
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections import Counter
from functools import cache
from pathlib import Path

import module_graph

ROOT = module_graph.ROOT
LAYOUT_DOC = ROOT / "docs" / "layout.md"

# --- the ratchets: written by `python tests/test_layout.py --write` (a kept line keeps its comment) ---
KNOWN_UPWARD: list[tuple[str, str, str]] = [
]

VOCABULARY_CEILING: dict[str, int] = {
}
# --- end of the ratchets ---


# ----- layers -----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Layer:
    rank: int  # 1 at the bottom
    name: str
    entries: tuple[str, ...]  # as docs/layout.md writes them: `errors`, `host/`, `subjects/*/`, `__init__`


def parse_layers(text: str, heading: str = "Layers") -> list[Layer]:
    """The rows of the table under the "## HEADING" heading: ``| N name | `a`, `b/` |``."""
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    layers = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        head = re.fullmatch(r"(\d+) (.+)", cells[0]) if len(cells) >= 2 else None
        if head:
            layers.append(Layer(int(head[1]), head[2], tuple(re.findall(r"`([^`]+)`", cells[1]))))
    assert [layer.rank for layer in layers] == list(range(1, len(layers) + 1)), "layers are numbered 1, 2, ... bottom to top"
    return layers


def _pattern(entry: str) -> tuple[re.Pattern, tuple[int, int]]:
    """An entry as a regex over dotted module names, and its specificity (an exact module
    over a package; a longer name over a shorter one)."""
    if entry == "__init__":
        return re.compile(r"remap_ab"), (1, 1)
    package = entry.endswith("/")
    parts = ["remap_ab", *entry.strip("/").split("/")]
    body = r"\.".join("[^.]+" if p == "*" else re.escape(p) for p in parts)
    return re.compile(body + (r"(\..+)?" if package else "")), (0 if package else 1, len(parts))


def assign(modules, layers: list[Layer]) -> tuple[dict[str, Layer], list[str]]:
    """Each module's layer (its most specific entry), and the problems: a module no entry
    names, or two layers' entries naming it as specifically."""
    matchers = [(layer, *_pattern(entry)) for layer in layers for entry in layer.entries]
    placed, problems = {}, []
    for module in modules:
        hits = sorted(((score, layer) for layer, pattern, score in matchers if pattern.fullmatch(module)),
                      key=lambda hit: hit[0], reverse=True)
        if not hits:
            problems.append(f"{module}: in no layer (add it to the table in docs/layout.md)")
        elif len(hits) > 1 and hits[0][0] == hits[1][0] and hits[0][1] != hits[1][1]:
            problems.append(f"{module}: in layers {hits[0][1].name} and {hits[1][1].name}")
        else:
            placed[module] = hits[0][1]
    return placed, problems


def short(module: str) -> str:
    """A module as the tables write it: ``remap_ab.`` left out, ``__init__`` for remap_ab."""
    return module.removeprefix("remap_ab.") if module != "remap_ab" else "__init__"


def full(name: str) -> str:
    return "remap_ab" if name == "__init__" else "remap_ab." + name


def upward_arrows(arrows, placed: dict[str, Layer]) -> set[tuple[str, str, str]]:
    """(importer, imported, kind) of each arrow from a lower layer to a higher one."""
    return {(short(a.importer), short(a.imported), a.kind) for a in arrows
            if a.importer in placed and a.imported in placed and placed[a.importer].rank < placed[a.imported].rank}


@cache
def layers() -> list[Layer]:
    return parse_layers(LAYOUT_DOC.read_text())


def test_every_module_has_one_layer():
    _, problems = assign(module_graph.modules(), layers())
    assert not problems, "\n".join(problems)


def test_no_import_arrow_runs_up_a_layer_but_the_known_ones():
    placed, _ = assign(module_graph.modules(), layers())
    found = upward_arrows(module_graph.arrows(), placed)
    known = set(KNOWN_UPWARD)
    new = sorted(found - known)
    gone = sorted(known - found)
    by_layer = {short(m): placed[m].name for m in placed}
    assert not new, "import arrows up a layer (docs/layout.md, Layers): " + "; ".join(
        f"{a} ({by_layer[a]}) -> {b} ({by_layer[b]}), {kind}" for a, b, kind in new)
    assert not gone, f"gone, remove from KNOWN_UPWARD (python tests/test_layout.py --write): {gone}"
    assert len(KNOWN_UPWARD) == len(known), "KNOWN_UPWARD lists an arrow twice"


def test_the_ratchets_are_at_zero():
    # The core knows no subject (issue 61): no arrow up, no subject's word outside its package.
    assert KNOWN_UPWARD == [], "an import arrow runs up a layer: the machinery reaches a subject only through the protocol"
    assert VOCABULARY_CEILING == {}, "a subject's words outside its package: say it in the machinery's own words"


def subject_layer_problems(layers_: list[Layer], placed: dict[str, Layer]) -> list[str]:
    """The subjects' layer must be the top one and hold every module of a subject's
    package: an entry placing one lower (``subjects/remap/charts`` among the foundations)
    would hide an arrow from the machinery into it."""
    top = max(layers_, key=lambda layer: layer.rank)
    problems = [] if "subjects/*/" in top.entries else [f"the top layer ({top.name}) does not hold `subjects/*/`"]
    problems += [f"{m}: a subject's module in layer {layer.name}, below the subjects'"
                 for m, layer in sorted(placed.items()) if owner(m) and layer.rank != top.rank]
    return problems


def test_the_subjects_are_the_top_layer_and_nothing_outside_imports_them():
    placed, _ = assign(module_graph.modules(), layers())
    assert not subject_layer_problems(layers(), placed)
    into = sorted(f"{short(a.importer)} -> {short(a.imported)} ({a.kind}, line {a.line})" for a in module_graph.arrows()
                  if owner(a.imported) and not owner(a.importer))
    assert not into, "the machinery imports a subject's module (go through remap_ab.subjects and the protocol): " + "; ".join(into)


def test_a_subject_module_placed_low_is_caught():
    table = ("\n## Layers\n| layer | modules |\n|---|---|\n| 1 foundations | `errors`, `subjects/remap/charts` |\n"
             "| 2 drivers | `bench/` |\n| 3 subjects | `subjects/*/` |\n")
    found = parse_layers(table)
    placed, problems = assign(["remap_ab.errors", "remap_ab.bench.figures", "remap_ab.subjects.remap.charts",
                               "remap_ab.subjects.remap.report.report"], found)
    assert not problems
    assert subject_layer_problems(found, placed) == [
        "remap_ab.subjects.remap.charts: a subject's module in layer foundations, below the subjects'"]
    assert subject_layer_problems(found[:2], {}) == ["the top layer (drivers) does not hold `subjects/*/`"]


def test_an_upward_arrow_is_caught():
    # The sanitizer's report importing a judge's plural() (an arrow memcheck.py had), in
    # a table of its own: the modules are names, not files.
    table = ("\n## Layers\n| layer | modules |\n|---|---|\n| 1 foundations | `errors`, `host/` |\n"
             "| 2 sanitizer | `sanitizer/` |\n| 3 judge | `compare` |\n| 4 subjects | `subjects/*/` |\n")
    found = parse_layers(table)
    modules = ["remap_ab.errors", "remap_ab.host.gil", "remap_ab.sanitizer.memcheck", "remap_ab.compare",
               "remap_ab.subjects.topology.calls"]
    placed, problems = assign(modules, found)
    assert not problems and placed["remap_ab.subjects.topology.calls"].name == "subjects"
    arrows = [module_graph.Arrow("remap_ab.sanitizer.memcheck", "remap_ab.compare", "module", 1),
              module_graph.Arrow("remap_ab.compare", "remap_ab.errors", "module", 1),
              module_graph.Arrow("remap_ab.host.gil", "remap_ab.subjects.topology.calls", "typing", 1)]
    assert upward_arrows(arrows, placed) == {("sanitizer.memcheck", "compare", "module"),
                                             ("host.gil", "subjects.topology.calls", "typing")}
    _, problems = assign(["remap_ab.report"], found)
    assert problems == ["remap_ab.report: in no layer (add it to the table in docs/layout.md)"]


# ----- the remap's folders (issue 61, part 5) --------------------------------------------

REMAP = "remap_ab.subjects.remap"
REMAP_HEADING = "The remap's layers"


def remap_layers(text: str) -> list[Layer]:
    """The table under "## The remap's layers", its entries relative to
    ``subjects/remap/`` (``case/`` a folder, ``subject`` a top-level module, ``__init__``
    the package itself) rewritten as the package table writes them."""
    return [Layer(layer.rank, layer.name, tuple("subjects/remap" if e == "__init__" else f"subjects/remap/{e}"
                                                  for e in layer.entries))
            for layer in parse_layers(text, REMAP_HEADING)]


def folder_problems(found: list[Layer], folders: set[str]) -> list[str]:
    """The folder boundary is the layer boundary: every entry is a whole folder or a
    top-level module, every folder of the remap is one layer's entry, and a layer holds
    one folder at most."""
    problems = []
    for layer in found:
        held = [e for e in layer.entries if e.endswith("/")]
        problems += [f"`{e}` names a module inside a folder: a folder is one layer"
                     for e in layer.entries if not e.endswith("/") and e.count("/") > 2]
        if len(held) > 1:
            problems.append(f"layer {layer.name} holds {len(held)} folders: one folder, one layer")
    named = [e.strip("/").rsplit("/", 1)[-1] for layer in found for e in layer.entries if e.endswith("/")]
    problems += [f"{f}/: in no layer of the remap's table" for f in sorted(folders - set(named))]
    problems += [f"{f}/: no such folder" for f in sorted(set(named) - folders)]
    return problems


def remap_folders() -> set[str]:
    return {p.parent.name for p in (ROOT / "remap_ab/subjects/remap").glob("*/__init__.py")}


def test_the_remaps_folders_are_its_layers():
    found = remap_layers(LAYOUT_DOC.read_text())
    assert not folder_problems(found, remap_folders())
    modules = [m for m in module_graph.modules() if m == REMAP or m.startswith(REMAP + ".")]
    placed, problems = assign(modules, found)
    assert not problems, "\n".join(problems)
    up = sorted(upward_arrows(module_graph.arrows(), placed))
    assert not up, "an import runs up the remap's folders (docs/layout.md, The remap's layers): " + "; ".join(
        f"{a} ({placed[full(a)].name}) -> {b} ({placed[full(b)].name}), {kind}" for a, b, kind in up)


def test_a_remap_folder_importing_upward_or_split_is_caught():
    table = ("\n## The remap's layers\n| layer | modules |\n|---|---|\n| 1 case | `case/`, `traced` |\n"
             "| 2 judge | `judge/`, `grid/` |\n| 3 subject | `subject`, `judge/call`, `__init__` |\n")
    found = remap_layers(table)
    assert folder_problems(found, {"case", "judge", "grid", "report"}) == [
        "layer judge holds 2 folders: one folder, one layer",
        "`subjects/remap/judge/call` names a module inside a folder: a folder is one layer",
        "report/: in no layer of the remap's table"]
    placed, problems = assign([REMAP, f"{REMAP}.case.config", f"{REMAP}.judge.runner", f"{REMAP}.traced"], found)
    assert not problems and placed[REMAP].name == "subject" and placed[f"{REMAP}.traced"].name == "case"
    arrows = [module_graph.Arrow(f"{REMAP}.case.config", f"{REMAP}.judge.runner", "local", 1),
              module_graph.Arrow(f"{REMAP}.judge.runner", f"{REMAP}.case.config", "module", 1)]
    assert upward_arrows(arrows, placed) == {("subjects.remap.case.config", "subjects.remap.judge.runner", "local")}


def test_no_test_file_ships_inside_the_package():
    # The remap's property suite ships (remap-ab mutants runs it from an install) as
    # property modules, not test files; tests/test_properties_*.py collect them.
    shipped = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "remap_ab").rglob("*.py")
                     if p.name.startswith("test_") or p.name.endswith("_test.py") or p.name == "conftest.py")
    assert not shipped, f"test files inside remap_ab/: {shipped}"


# ----- subject vocabulary -----------------------------------------------------------

# Names a subject's declarations hold that are every subject's words (or English), not
# one kernel's: not counted. "segments": the topology's case field and the remap's tile
# segments alike.
GENERIC = {"mode", "seed", "layout", "table", "counts", "backend", "out", "rows", "keep", "lens", "segments"}

# The words of each subject beyond its case's fields and its wrappers' names. Not bare
# "witness": mutants/ names a mutant's first differing case so.
WORDS = {
    "remap": ("CaseConfig", "topk", "dcp", "req_id", "block_table", "valid_count", "lane", "compact", "convert",
              "BLOCK_STRIDE_ROWS", "max_row_valid", "hazard_rows", "backend_view", "tokens", "run_case",
              "generate_inputs", "CaseInputs",
              # its input tensors beyond req_id and block_table (inputs.TENSOR_NAMES, SPEC §2)
              "token_indices", "prefill_request_ids", "prefill_starts"),
    "topology": ("TopologyCase", "num_segments", "learned", "context_lens", "max_replacements",
                 "learned_keep"),
    "slotmap": ("slot_mapping", "query_start_loc", "req_indices", "blocks_per_kv_block", "pad_tail"),
}


@cache
def claimed() -> dict[str, frozenset[str]]:
    """subject -> every word it uses: its case's field names, its wrappers' names and
    optional parameters (remap: features.py), and WORDS; GENERIC left out."""
    from remap_ab.subjects.remap.case.config import CaseConfig
    from remap_ab.subjects.remap.judge import features
    from remap_ab.subjects.topology.config import TopologyCase

    derived = {
        "remap": [f.name for f in dataclasses.fields(CaseConfig)] + list(features.WRAPPER) + list(features.BY_NAME),
        "topology": [f.name for f in dataclasses.fields(TopologyCase)],
        # its axes that are vLLM's words the remap uses too; the rest are English (rank, split, tail)
        "slotmap": ["tokens", "block_size", "interleave"],
    }
    return {subject: frozenset(w for w in (*names, *WORDS[subject]) if w not in GENERIC) for subject, names in derived.items()}


@cache
def vocabulary() -> dict[str, tuple[str, ...]]:
    """subject -> the words counted as its: a word two subjects use (topk) is the first
    one's (the remap's), so no word counts twice."""
    words: dict[str, tuple[str, ...]] = {}
    for subject, own in claimed().items():
        taken = {w for earlier in words.values() for w in earlier}
        words[subject] = tuple(sorted(own - taken))
    return words


def _word_regex(words) -> re.Pattern:
    # A word counts alone, inside a snake_case name or in prose, with a plural "s"; an
    # all-lowercase word in any case ("DCP"), a name with capitals as written.
    def one(w: str) -> str:
        body = re.escape(w) + "s?"
        return f"(?i:{body})" if w.islower() else body
    return re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(one(w) for w in sorted(words, key=len, reverse=True))
                      + r")(?![A-Za-z0-9])")


def count_words(text: str, words) -> int:
    return len(_word_regex(words).findall(text)) if words else 0


def owner(module: str) -> str | None:
    """The subject whose package holds ``module`` (None: the machinery)."""
    parts = module.split(".")
    return parts[2] if len(parts) >= 3 and parts[:2] == ["remap_ab", "subjects"] else None


def vocabulary_counts() -> dict[tuple[str, str], int]:
    """(subject, module) -> how many of the subject's words the module holds, for each
    module outside that subject's package with any. Inside another subject's package a
    word both subjects use (topk) is that subject's own and not counted."""
    words = vocabulary()
    counts = {}
    for module, path in module_graph.modules().items():
        text = path.read_text()
        home = owner(module)
        for subject, own in words.items():
            if home == subject:
                continue
            counted = [w for w in own if home is None or w not in claimed()[home]]
            n = count_words(text, counted)
            if n:
                counts[(subject, short(module))] = n
    return counts


def ceiling_problems(counts: dict, table: dict) -> tuple[list[str], list[str]]:
    """(modules over their ceiling, modules under it) for counts keyed (subject, module)
    against a table keyed "subject module"."""
    ceiling = {tuple(key.split(" ", 1)): n for key, n in table.items()}
    over = sorted(f"{s} {m}: {n} > {ceiling.get((s, m), 0)}" for (s, m), n in counts.items() if n > ceiling.get((s, m), 0))
    under = sorted(f"{s} {m}: {counts.get((s, m), 0)} < {n}" for (s, m), n in ceiling.items() if counts.get((s, m), 0) < n)
    return over, under


def test_subject_vocabulary_outside_its_package_stays_at_its_ceiling():
    over, under = ceiling_problems(vocabulary_counts(), VOCABULARY_CEILING)
    assert not over, "more subject vocabulary outside its package than VOCABULARY_CEILING allows: " + "; ".join(over)
    assert not under, "fewer than VOCABULARY_CEILING says: lower it (python tests/test_layout.py --write): " + "; ".join(under)


def test_the_ceiling_catches_a_rise_a_drop_and_a_new_module():
    table = {"remap call": 3, "remap report": 2}
    assert ceiling_problems({("remap", "call"): 3, ("remap", "report"): 2}, table) == ([], [])
    assert ceiling_problems({("remap", "call"): 4, ("remap", "report"): 2, ("topology", "cli"): 1}, table) == (
        ["remap call: 4 > 3", "topology cli: 1 > 0"], [])
    assert ceiling_problems({("remap", "call"): 3}, table) == ([], ["remap report: 0 < 2"])


def test_vocabulary_is_derived_and_counted_in_names_and_prose():
    words = vocabulary()
    assert {"topk", "dcp_size", "BLOCK_STRIDE_ROWS", "triton_convert_req_index_to_global_index"} <= set(words["remap"])
    assert {"num_segments", "learned", "max_replacements"} <= set(words["topology"]) and "topk" not in words["topology"]
    assert not GENERIC & (set(words["remap"]) | set(words["topology"]))
    assert {"token_indices", "prefill_starts"} <= set(words["remap"])
    text = "cfg.topk; max_topk = 3  # the DCP path's topks\nvalid_counts_out, topkx, stopk, CaseConfigs, caseconfig\n"
    assert count_words(text, ["topk", "dcp", "valid_count", "CaseConfig"]) == 6
    assert owner("remap_ab.subjects.topology.calls") == "topology" and owner("remap_ab.subjects.remap") == "remap"
    assert owner("remap_ab.subjects") is None


# ----- lines per package (the closing note) -------------------------------------------

def package_of(path: Path) -> str:
    """remap_ab's subpackage a file is in (subjects: per subject), ``remap_ab`` for its
    top-level modules, else the checkout's top folder."""
    parts = path.relative_to(ROOT).parts
    if parts[0] != "remap_ab" or len(parts) == 2:
        return parts[0] if len(parts) > 1 else "."
    depth = 3 if parts[1] == "subjects" and len(parts) > 3 else 2
    return ".".join(parts[:depth])


def lines_per_package() -> Counter:
    """Lines of Python per package of the tree (remap_ab's subpackages, the kernels,
    strategies, tests, scripts)."""
    counts: Counter = Counter()
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).parts
        if rel[0].startswith(".") or rel[0] in ("build", "reports", "runs") or "egg-info" in rel[0]:
            continue
        counts[package_of(path)] += len(path.read_text().splitlines())
    return counts


def test_lines_per_package_counts_the_tree():
    counts = lines_per_package()
    assert counts["remap_ab.subjects.remap"] > 0 and counts["remap_ab"] > 0
    total = sum(len(p.read_text().splitlines()) for p in (ROOT / "remap_ab").rglob("*.py"))
    assert sum(n for k, n in counts.items() if k.startswith("remap_ab")) == total


# ----- the command ------------------------------------------------------------------

def _label(package: str) -> str:
    return {"remap_ab": "remap_ab (top-level modules)", "remap_ab.subjects": "remap_ab.subjects (__init__)"}.get(package, package)


def _report() -> str:
    placed, problems = assign(module_graph.modules(), layers())
    out = [f"layers (docs/layout.md): {', '.join(f'{layer.rank} {layer.name}' for layer in layers())}"]
    out += [f"  problem: {p}" for p in problems]
    up = upward_arrows(module_graph.arrows(), placed)
    by_kind = Counter(kind for _, _, kind in up)
    out.append(f"upward arrows: {len(up)} ({', '.join(f'{by_kind[k]} {k}' for k in module_graph.KINDS)})")
    for a, b, kind in sorted(up):
        out.append(f"  {a} -> {b} ({kind})")
    counts = vocabulary_counts()
    for subject in vocabulary():
        rows = {m: n for (s, m), n in counts.items() if s == subject}
        per_package: Counter = Counter()
        for m, n in rows.items():
            per_package[package_of(module_graph.modules()[full(m)])] += n
        out.append(f"{subject} vocabulary outside remap_ab/subjects/{subject}/: {sum(rows.values())} in {len(rows)} modules")
        out += [f"  {_label(pkg):32} {n:6}" for pkg, n in sorted(per_package.items())]
        out += [f"    {m:40} {n:6}" for m, n in sorted(rows.items(), key=lambda kv: (-kv[1], kv[0]))]
    out.append("lines per package:")
    out += [f"  {_label(pkg):32} {n:6}" for pkg, n in sorted(lines_per_package().items())]
    return "\n".join(out)


def test_print_the_layout_report(capsys):
    # ``pytest tests/test_layout.py -s`` shows it; the closing note quotes it.
    with capsys.disabled():
        print("\n" + _report())


def _write() -> None:
    """Rewrite the ratchets from the tree, keeping the comment of each arrow that stays."""
    path = Path(__file__)
    text = path.read_text()
    start = text.index("KNOWN_UPWARD: list[tuple[str, str, str]] = [\n")
    end = text.index("# --- end of the ratchets ---")
    comments = dict(re.findall(r'^    (\("[^"]+", "[^"]+", "[^"]+"\)),(  # .*)?$', text[start:end], re.MULTILINE))
    placed, problems = assign(module_graph.modules(), layers())
    assert not problems, problems

    def why(a: str, b: str) -> str:
        if owner(full(b)) and not owner(full(a)):
            return "  # machinery -> subject: the subject step removes it"
        return f"  # {placed[full(a)].name} -> {placed[full(b)].name}"

    lines = ["KNOWN_UPWARD: list[tuple[str, str, str]] = ["]
    for a, b, kind in sorted(upward_arrows(module_graph.arrows(), placed)):
        key = f'("{a}", "{b}", "{kind}")'
        lines.append(f"    {key},{comments.get(key) or why(a, b)}")
    lines += ["]", "", "VOCABULARY_CEILING: dict[str, int] = {"]
    lines += [f'    "{s} {m}": {n},' for (s, m), n in sorted(vocabulary_counts().items())]
    lines += ["}", ""]
    path.write_text(text[:start] + "\n".join(lines) + text[end:])


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if sys.argv[1:] == ["--write"]:
        _write()
    print(_report())
