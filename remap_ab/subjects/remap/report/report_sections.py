"""One report section per check that failed, built from the failures' evidence.

A section is plain data (``Section``: a title and blocks, each a paragraph, a table or
code lines) that both templates render the same way, so Markdown and HTML never say
different things. Each check with its own wording has a small renderer here
(``RENDERERS``, keyed by the check's word); any other check — one added later, such as
an output-layout or a B-only feature check — gets ``generic``: its verdict line, a
side-by-side table of whatever its evidence holds under ``"a"``, ``"b"`` (and
``"oracle"``) as objects, e.g. ``{"tensor": "out", "a": {"shape": [3, 8], "stride":
[8, 1]}, "b": {"shape": [3, 8], "stride": [1, 3]}}``, and a table of its other fields.
So a new check needs no code here to be shown; a renderer is only for better words.

The value checks (out, counts, prefix_set, tail, order) have no section here: their
evidence is the outputs, shown by the report's value sections (lanes, counts, the
picture), and only when values differ. Crash and timeout reports say what happened
in their verdict. Paragraph text marks code with backticks; the HTML template turns
them into ``<code>``.

Needs no torch and no Triton: everything comes from ``Mismatch`` objects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

VALUE_CHECKS = frozenset({"out", "counts", "prefix_set", "tail", "order"})
NO_SECTION = VALUE_CHECKS | {"crash", "timeout"}


@dataclass(frozen=True)
class Block:
    """One piece of a section: ``kind`` "text" (``text``), "table" (``headers``,
    ``rows`` of cells as strings) or "code" (``lines``)."""

    kind: str
    text: str = ""
    headers: tuple = ()
    rows: tuple = ()
    lines: tuple = ()


def text(s: str) -> Block:
    return Block("text", text=s)


def table(headers, rows) -> Block:
    return Block("table", headers=tuple(headers), rows=tuple(tuple(_cell(c) for c in r) for r in rows))


def code(*lines: str) -> Block:
    return Block("code", lines=tuple(lines))


@dataclass(frozen=True)
class Section:
    """The section of one failed check: ``check`` (its word, the HTML anchor) and
    ``title``, then its blocks."""

    check: str
    title: str
    blocks: list = field(default_factory=list)


TITLES = {
    "inputs_written": "Inputs written",
    "aliased": "Outputs sharing an input's storage",
    "rejects": "Rejection",
    "sync": "Host synchronisation inside the call",
    "stream": "Outputs not ready on the caller's stream",
    "graph": "CUDA graph capture and replay",
    "backend_view": "What the attention backend would read",
    "error": "Raised",
    "shape": "What came back",
    "memcheck": "Memory accesses outside the tensors",
    "layout": "Output layout",
}


def sections(failures: list) -> list[Section]:
    """One section per check that failed, in the order the verdict lists them; the
    failures of one check (several tensors, both sides) share its section."""
    by_check: dict[str, list] = {}
    for m in failures:
        word = str(m.check)
        if word not in NO_SECTION:
            by_check.setdefault(word, []).append(m)
    return [Section(word, TITLES.get(word, word.replace("_", " ").capitalize()),
                    [b for m in ms for b in RENDERERS.get(word, generic)(m)])
            for word, ms in by_check.items()]


# --------------------------------------------------------------------------- renderers


def generic(m) -> list[Block]:
    """Any check: its verdict line, then its evidence as tables (see the module docstring)."""
    blocks = [text(f"`{m.impl}`: {m.message}")]
    ev = dict(m.evidence)
    sides = [k for k in ("a", "b", "oracle") if isinstance(ev.get(k), dict)]
    if sides:
        keys: list = []
        for k in sides:
            keys += [x for x in ev[k] if x not in keys and x != "name"]
        heads = [ev[k].get("name", k.upper()) for k in sides]
        blocks.append(table(["", *heads], [[key, *(ev[k].get(key) for k in sides)] for key in keys]))
        for k in sides:
            del ev[k]
    rest = [(k, v) for k, v in ev.items() if not isinstance(v, dict)]
    if rest:
        blocks.append(table(["field", "value"], [[k.replace("_", " "), v] for k, v in rest]))
    return blocks


def _inputs_written(m) -> list[Block]:
    ev = m.evidence
    if not ev:
        return generic(m)
    where = (f"`{ev['tensor']}` (shape {_shape(ev['shape'])}, strides {_shape(ev['stride'])}"
             + (", a strided view of a wider buffer" if ev.get("strided") else "") + ")")
    if ev["in_slack"] == 0:
        split = "all of them elements of the view"
    elif ev["in_view"] == 0:
        split = "none of them an element of the view: all in the slack of its buffer (between or after its rows)"
    else:
        split = f"{ev['in_view']} in the view and {ev['in_slack']} in the slack of its buffer (between or after its rows)"
    first = ev.get("first", [])
    blocks = [text(f"`{m.impl}` wrote into its input {where}: {_n(ev['changed'], 'element')} changed, {split}. "
                   f"An implementation must leave what it is given as it was."),
              table(["element", "in the view?", "before", "after"],
                    [[f["at"], "yes" if f["in_view"] else "no (slack)", f["before"], f["after"]] for f in first])]
    if ev["changed"] > len(first):
        blocks.append(text(f"The first {len(first)} of {ev['changed']} changed elements, in storage order (an element "
                           f"written with the value it held is not changed, so not listed)."))
    return blocks


def _aliased(m) -> list[Block]:
    ev = m.evidence
    if not ev:
        return generic(m)
    return [text(f"`{m.impl}` returned `{ev['output']}` in the storage of its input `{ev['input']}` "
                 f"({_n(ev['shared_bytes'], 'byte')} shared): a caller that reuses or frees the input "
                 f"changes the output. Outputs must be new tensors."),
            table(["output", "shares storage with input", "bytes shared"],
                  [[ev["output"], ev["input"], ev["shared_bytes"]]])]


def _rejects(m) -> list[Block]:
    ev = m.evidence
    if not ev:
        return generic(m)
    a, b = ev["a"], ev["b"]
    blocks = [text(f"The call breaks SPEC §6's precondition `{ev['precondition']}`: {ev['call']}. "
                   f"Where `{a['name']}` (A) rejects a call, `{b['name']}` (B) must reject it with the same "
                   f"exception type or a subclass of it."),
              table(["argument of " + (ev.get("wrapper") or "the wrapper"), "as given"],
                    [[k, v] for k, v in ev.get("arguments", {}).items()]),
              table(["implementation", "did", "message"], [[f"{s['name']} ({role})", _did(s), s.get("message", "")]
                                             for role, s in (("A", a), ("B", b))])]
    for role, s in (("A", a), ("B", b)):
        if s.get("memcheck"):
            blocks.append(text(f"Memcheck of {role}'s call: {s['memcheck'].partition(': ')[2] or s['memcheck']}."))
            if s.get("memcheck_findings"):
                blocks.append(code(*s["memcheck_findings"]))
    return blocks


def _did(side: dict) -> str:
    if "raised" in side:
        return f"raised {side['raised'].rpartition('.')[2]}"
    return f"accepted the call; returned {side.get('returned', 'nothing')}"


def _sync(m) -> list[Block]:
    ev = m.evidence
    if not ev:
        return generic(m)
    blocks = [text(f"`{m.impl}` synchronised with the host inside the call; torch's sync debug mode "
                   f"(\"error\") stopped it with: {ev['error']}. vLLM captures this call in CUDA graphs, where a "
                   f"host synchronisation fails the capture.")]
    frame = ev.get("frame")
    if frame:
        blocks += [text("Where, in its code:"), code(f"{frame['file']}:{frame['line']} in {frame['function']}",
                                                     f"    {frame['code']}")]
    else:
        blocks.append(text("No frame of its own code was in the traceback."))
    return blocks


def _replayed(m) -> list[Block]:
    """stream and graph: the first element where the two readings differ."""
    ev = m.evidence
    if ev.get("capture_failed"):
        frame = ev.get("frame")
        return [text(f"`{m.impl}`: {m.message}."),
                *([text("Where, in its code:"), code(f"{frame['file']}:{frame['line']} in {frame['function']}",
                                                     f"    {frame['code']}")] if frame else [])]
    if not ev or "compared" not in ev:
        return generic(m)
    x, y = ev["compared"]
    rows = [[name, d["at"], d[x], d[y], d["differing"]] for name in ("out", "valid_counts") if (d := ev.get(name))]
    blocks = [text(f"`{m.impl}`: {m.message}.")]
    if rows:
        blocks.append(table(["tensor", "first differing element", x, y, "elements differing"], rows))
    else:
        blocks.append(text("The outputs are compared as sets per row (an unordered compaction): no single element "
                           "is named."))
    return blocks


def _backend_view(m) -> list[Block]:
    ev = m.evidence
    if not ev:
        return generic(m)
    start = ev["from"]
    allowed = ("The wrapper-level contract allows this difference; the backend does not."
               if ev.get("allowed_by_wrapper") else "This is in addition to the wrapper-level failure above.")
    rows = []
    for s in ev["sides"]:
        entries = ", ".join(str(v) for v in s["entries"])
        more = ", …" if start + len(s["entries"]) < s["length"] else ""
        rows.append([s["name"], s["count"], ("…, " if start else "") + entries + more])
    return [text(f"{ev['backend']} {ev['rule']}. Row {ev['row']} is the first of "
                 f"{_n(ev.get('rows', 1), 'row')} it would read differently from A's and B's outputs; "
                 f"the views part at position {ev['first_difference']}. {allowed}"),
            table(["output", "count it reads", f"what it reads of row {ev['row']}, from position {start}"], rows)]


RENDERERS: dict[str, Callable[[Any], list[Block]]] = {
    "inputs_written": _inputs_written,
    "aliased": _aliased,
    "rejects": _rejects,
    "sync": _sync,
    "stream": _replayed,
    "graph": _replayed,
    "backend_view": _backend_view,
}


def _shape(dims) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _n(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _cell(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, (list, tuple)):
        return _shape(v)
    return str(v)
