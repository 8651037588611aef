"""Every command line the README and docs/ show in a fenced code block goes through the
option parser that would read it, so the documentation cannot drift from the options.

- ``remap-ab ...`` and ``python -m remap_ab ...``: the command line's own parser
  (``remap_ab.cli.build_parser``), parse only, nothing runs; a ``run`` line's case
  options also become its ``CaseConfig`` (``config_from_args``, where a value such as
  ``--tokens three`` is refused). argparse accepts a prefix of
  an option (``--max-tok``); a documented line must spell it whole, so every option used
  must also be one the command's ``--help`` lists.
- ``pytest ...``: the ``--remap-*`` options through the plugin's own ``pytest_addoption``
  (their names exactly, their values through their types); pytest's and xdist's own
  options are theirs to keep and are not checked here.
- A line whose arguments are elided (``...``) cannot be parsed alone: the options it does
  show must be ones its command's ``--help`` lists.

Shell syntax handled: ``\\`` continuations, ``# comments``, ``$ `` prompts, ``NAME=value``
prefixes, ``&&``/``;``/``|`` chains, ``git bisect run``/``timeout N`` wrappers, a YAML
``- run:`` step, and ``<placeholders>`` (parsed as values).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from remap_ab import cli
from remap_ab.errors import RemapABError
from remap_ab.pytest import plugin
from remap_ab.subjects.remap.parts.run_command import config_from_args

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
NOT_SHELL = {"python", "py", "toml", "json", "html", "markdown", "md", "diff"}
PLACEHOLDER = re.compile(r"<([A-Za-z][\w.-]*)>")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
OPERATORS = {"&&", "||", ";", "|", "&", "(", ")"}
REDIRECTIONS = {">", ">>", "<", "2>", "&>"}
ELISIONS = {"...", "…"}
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


@dataclass(frozen=True)
class Command:
    where: str  # file:line, for the test id and the message
    tool: str  # "remap-ab" or "pytest"
    argv: tuple[str, ...]  # the arguments after the tool
    elided: bool  # the line shows only some of its arguments


def commands_in(text: str, name: str) -> list[Command]:
    """The remap-ab and pytest command lines of ``text``'s fenced shell blocks."""
    found: list[Command] = []
    fence: str | None = None
    language = ""
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        opening = FENCE.match(line)
        if fence is None:
            if opening:
                fence, language = opening.group(1), opening.group(2).lower()
            continue
        if opening and opening.group(1) == fence and not opening.group(2):
            fence, pending = None, ""
            continue
        if language in NOT_SHELL:
            continue
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        found += _commands_of_line(pending + line, f"{name}:{start}")
        pending = ""
    return found


def _commands_of_line(line: str, where: str) -> list[Command]:
    line = re.sub(r"^\s*\$\s", "", line)  # a console prompt
    line = PLACEHOLDER.sub(lambda m: m.group(1).upper(), line)
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # an unbalanced quote: prose, not a command
        return []
    found: list[Command] = []
    simple: list[str] = []
    for word in [*words, ";"]:
        if word in OPERATORS:
            command = _command(simple, where)
            if command:
                found.append(command)
            simple = []
        else:
            simple.append(word)
    return found


def _command(words: list[str], where: str) -> Command | None:
    words = _without_redirections(words)
    while words:  # what precedes the command: variables, wrappers, a YAML step
        if ASSIGNMENT.match(words[0]) or words[0] in ("-", "run:", "time", "env", "exec", "nohup"):
            words = words[1:]
        elif words[:3] == ["git", "bisect", "run"]:
            words = words[3:]
        elif words[0] == "timeout" and len(words) > 1:
            words = words[2:]
        else:
            break
    if not words:
        return None
    tool, rest = None, words[1:]
    if words[0] == "remap-ab":
        tool = "remap-ab"
    elif words[0] == "pytest":
        tool = "pytest"
    elif re.fullmatch(r"(\S*/)?python3?", words[0]) and len(words) > 2 and words[1] == "-m":
        tool = {"remap_ab": "remap-ab", "pytest": "pytest"}.get(words[2])
        rest = words[3:]
    if tool is None:
        return None
    kept = tuple(w for w in rest if w not in ELISIONS)
    return Command(where, tool, kept, elided=len(kept) != len(rest))


def _without_redirections(words: list[str]) -> list[str]:
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in REDIRECTIONS:
            skip = True
        else:
            kept.append(word)
    return kept


# -- checking ------------------------------------------------------------------------


@functools.cache
def _cli_parser() -> argparse.ArgumentParser:
    return cli.build_parser()


@functools.cache
def _listed_options(command: str) -> frozenset[str]:
    """The options ``remap-ab COMMAND --help`` lists (``remap-ab --help`` for None)."""
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), pytest.raises(SystemExit):
        _cli_parser().parse_args([command, "--help"] if command else ["--help"])
    return frozenset(OPTION.findall(shown.getvalue()))


def _used_options(argv: tuple[str, ...]) -> list[str]:
    return [w.split("=", 1)[0] for w in argv if re.match(r"--?[A-Za-z]", w)]


def check_remap_ab(command: Command) -> str | None:
    """None when the line's arguments are ones remap-ab accepts, else what is wrong."""
    if not command.elided:  # only a whole line can be parsed
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
                args = _cli_parser().parse_args(list(command.argv))
        except SystemExit as stop:
            if stop.code not in (0, None):  # 0: the line asks for --help
                return errors.getvalue().strip() or f"exit {stop.code}"
        else:
            if args.command == "run":  # a case's options are strings until they become its config
                try:
                    config_from_args(args)
                except RemapABError as exc:
                    return f"remap-ab run: {exc}"
    name = next((w for w in command.argv if w in cli.COMMANDS), None)
    unlisted = [o for o in _used_options(command.argv) if o not in _listed_options(name)]
    if unlisted:
        return f"remap-ab {name or ''}: {', '.join(unlisted)} not among the options its --help lists"
    return None


class _PluginOptionError(Exception):
    pass


class _PluginOptions(argparse.ArgumentParser):
    """The plugin's options as pytest would declare them, for parsing a documented line."""

    def __init__(self):
        super().__init__(prog="pytest", add_help=False, allow_abbrev=False)
        plugin.pytest_addoption(self)

    def getgroup(self, name, description=""):
        return self

    def addoption(self, *names, **attrs):
        self.add_argument(*names, **attrs)

    def error(self, message):
        raise _PluginOptionError(message)


def check_pytest(command: Command) -> str | None:
    """None when every ``--remap-*`` option of the line is the plugin's and takes its value."""
    try:
        _, rest = _PluginOptions().parse_known_args(list(command.argv))
    except _PluginOptionError as exc:
        return f"pytest: {exc}"
    unknown = [o for o in _used_options(tuple(rest)) if o.startswith("--remap")]
    return f"pytest: {', '.join(unknown)} not an option of remap-ab's plugin" if unknown else None


def check(command: Command) -> str | None:
    return check_remap_ab(command) if command.tool == "remap-ab" else check_pytest(command)


def _documented() -> list[Command]:
    return [c for doc in DOCUMENTS for c in commands_in(doc.read_text(), str(doc.relative_to(REPO)))]


DOCUMENTED = _documented()


# -- the documents -------------------------------------------------------------------


def test_the_documents_show_commands_of_every_kind():
    # an extractor that silently finds nothing would pass every line below
    remap_ab = [c for c in DOCUMENTED if c.tool == "remap-ab"]
    pages = {c.where.split(":")[0] for c in remap_ab}
    assert len(remap_ab) >= 40, len(remap_ab)
    assert "README.md" in pages and len(pages) >= 10, pages
    assert sum(c.tool == "pytest" and any(w.startswith("--remap") for w in c.argv) for c in DOCUMENTED) >= 5
    assert {c.argv[0] for c in remap_ab if c.argv} >= set(cli.COMMANDS)


@pytest.mark.parametrize("command", DOCUMENTED, ids=[f"{c.where}:{c.tool}" for c in DOCUMENTED])
def test_a_documented_command_line_parses(command):
    assert check(command) is None, f"{command.where}: {command.tool} {' '.join(command.argv)}: {check(command)}"


# -- the checker itself --------------------------------------------------------------


def _one(text: str) -> Command:
    (command,) = commands_in(text, "doc.md")
    return command


@pytest.mark.parametrize(
    "line, error",
    [
        ("remap-ab sweep --max-token 3", "--max-token"),  # misspelt
        ("remap-ab sweep --max-tok 3", "--max-tok"),  # a prefix argparse alone would accept
        ("remap-ab run --tokens 3 --device gpu", "invalid choice"),  # a value the option refuses
        ("remap-ab run --tokens three", "three"),
        ("remap-ab sweeps --max-tokens 3", "invalid choice"),  # no such command
        ("remap-ab run --max-tokens 3", "--max-tokens"),  # another command's option
        ("remap-ab mutants --jsn out.json ...", "--jsn"),  # elided: the shown options still count
        ("pytest --remap-grid --remap-grid-max-token=1", "--remap-grid-max-token"),
        ("pytest --remap-grid --remap-grid-max-tokens=many", "many"),
    ],
)
def test_drift_between_a_document_and_the_options_fails(line, error):
    text = f"Some page.\n\n```bash\n{line}   # what it does\n```\n"
    problem = check(_one(text))
    assert problem is not None and error in problem, problem
    corrected = {"--max-token ": "--max-tokens ", "--max-tok ": "--max-tokens ", "gpu": "cpu", "three": "3",
                 "sweeps": "sweep", "run --max": "sweep --max", "--jsn": "--json", "max-token=": "max-tokens=",
                 "=many": "=1"}
    fixed = next(line.replace(old, new) for old, new in corrected.items() if old in line)
    assert check(_one(text.replace(line, fixed))) is None, fixed


def test_shell_syntax_around_a_command_line_is_read_as_a_shell_would():
    text = """
```console
$ REMAP_AB_TRACEBACK=1 remap-ab replay reports/<run>/<case-id>   # a comment --not-an-option
  cases: 311 run of 311 selected; replay: remap-ab run --mode convert ... --a old
```

```bash
cd ~/vllm && F=x.py remap-ab sweep --a main:$F \\
    --b HEAD:$F --max-tokens 16 | tail -3
git bisect run remap-ab run --bisect --b HEAD:$F --tokens 8
python -m remap_ab mutants --list -v > list.txt
```

```yaml
      - run: |
          pytest -p remap_ab.pytest.plugin -n 2 \\
            --remap-a origin/main:$F --remap-b HEAD:$F
```

```python
remap-ab = "not a command here"
```
"""
    assert [(c.where, c.tool, c.argv, c.elided) for c in commands_in(text, "doc.md")] == [
        ("doc.md:3", "remap-ab", ("replay", "reports/RUN/CASE-ID"), False),
        ("doc.md:8", "remap-ab", ("sweep", "--a", "main:$F", "--b", "HEAD:$F", "--max-tokens", "16"), False),
        ("doc.md:10", "remap-ab", ("run", "--bisect", "--b", "HEAD:$F", "--tokens", "8"), False),
        ("doc.md:11", "remap-ab", ("mutants", "--list", "-v"), False),
        ("doc.md:16", "pytest", ("-p", "remap_ab.pytest.plugin", "-n", "2", "--remap-a", "origin/main:$F",
                                 "--remap-b", "HEAD:$F"), False),
    ]
    assert all(check(c) is None for c in commands_in(text, "doc.md"))


LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_every_link_between_the_documents_resolves():
    # the README links each docs page; a page moved or renamed must take its links along
    broken = [
        f"{doc.relative_to(REPO)}: {target}"
        for doc in DOCUMENTS
        for target in LINK.findall(doc.read_text())
        if "://" not in target and not (doc.parent / target.split("#")[0]).exists()
    ]
    assert not broken, broken
    linked = set(LINK.findall((REPO / "README.md").read_text()))
    assert {f"docs/{page.name}" for page in DOCUMENTS[1:]} <= linked, "a docs page the README does not link"
