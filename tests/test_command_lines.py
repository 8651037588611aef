"""One builder of ``remap-ab`` command lines (remap_ab/command_line.py; issue 42, part 5):
every replay and run-again line the tool prints parses with the CLI's own parser back
into the values it was made from (quoted paths with spaces and quotes included), and no
other module builds a ``remap-ab`` command string."""

from __future__ import annotations

import argparse
import ast
import re
import shlex
from pathlib import Path

import pytest

from remap_ab import cli, command_line
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.judge import rejections
from remap_ab.subjects.remap.judge import runner as remap_runner
from remap_ab.subjects.remap.parts import run_command as run_command_module
from remap_ab.subjects.remap.parts.run_command import config_from_args
from remap_ab.subjects.remap.report.report import ImplementationInfo, replay_command, run_command
from remap_ab.sweep.run_folder import resume_command

PACKAGE = Path(command_line.__file__).parent
REPO = PACKAGE.parent
AWKWARD = "/tmp/a dir/it's b.py"  # a space and a quote: an unquoted line splits or breaks here
CONFIG = CaseConfig(mode="convert", tokens=2, topk=256, num_reqs=1, blocks_per_req=8, block_size=16)
GIT = ImplementationInfo("HEAD:kernels/x.py", source={"kind": "git", "path": "kernels/x.py", "sha256": "0" * 64,
                                                      "repo": "/tmp/the repo", "rev": "HEAD", "commit": "ab" * 20})
CUSTOM = ImplementationInfo("mypkg.remap", module="mypkg.remap", path_entry="/tmp/my mods")


def parsed(line: str) -> tuple[list[str], argparse.Namespace]:
    """The line's leading variable assignments (words) and its arguments as ``remap-ab`` parses them."""
    words = shlex.split(line)
    assignments = []
    while re.match(r"[A-Z_]+=", words[0]):
        assignments.append(words.pop(0))
    assert words[0] == command_line.PROGRAM
    return assignments, cli.build_parser(words[1]).parse_args(words[1:])


def test_run_lines_parse_back_into_their_case_and_implementations():
    _, args = parsed(run_command(CONFIG, "old", AWKWARD, ("random", 3)))
    assert (args.command, args.a, args.b, args.schedule) == ("run", "old", AWKWARD, "random:3")
    assert config_from_args(args) == CONFIG
    env, args = parsed(run_command(CONFIG, GIT, CUSTOM))
    assert (args.a, args.b, args.repo) == (f"HEAD@{'ab' * 20}:kernels/x.py", "mypkg.remap", "/tmp/the repo")
    assert env == ["PYTHONPATH=/tmp/my mods${PYTHONPATH:+:$PYTHONPATH}"]


def test_the_run_again_line_keeps_device_inputs_and_memcheck():
    asked = argparse.Namespace(schedule="tiles_reversed:7", inputs=Path("/tmp/saved inputs.pt"), memcheck=True)
    line = run_command_module._again_command(asked, CONFIG, "cpu", ("new", AWKWARD))
    _, args = parsed(line)
    assert (args.a, args.b, args.device, args.inputs, args.memcheck, args.schedule) == (
        "new", AWKWARD, "cpu", "/tmp/saved inputs.pt", True, "tiles_reversed:7")
    assert config_from_args(args) == CONFIG


def test_replay_lines_parse_and_pin_a_revision(tmp_path):
    folder = tmp_path / "run 1" / "abc"
    _, args = parsed(replay_command(folder, "old", "new"))
    assert (args.command, args.target, args.a, args.b) == ("replay", str(folder.resolve()), None, None)
    _, args = parsed(replay_command(folder, GIT, "new"))
    assert (args.a, args.b, args.repo) == (f"HEAD@{'ab' * 20}:kernels/x.py", None, "/tmp/the repo")


def test_rejection_and_memcheck_lines_parse():
    case = rejections.load()[0]
    _, args = parsed(rejections.run_line(case, "old", AWKWARD, "cpu", memcheck=True))
    assert (args.rejection, args.a, args.b, args.device, args.memcheck) == ([case.id], "old", AWKWARD, "cpu", True)
    _, args = parsed(remap_runner.memcheck_run_line(CONFIG, AWKWARD, "new", "cuda"))
    assert (args.a, args.b, args.device, args.memcheck) == (AWKWARD, "new", "cuda", True)
    assert config_from_args(args) == CONFIG


def test_the_sweep_and_soak_lines_parse(tmp_path):
    _, args = parsed(resume_command(tmp_path / "it's a root" / "run 1"))
    assert (args.resume, args.run, args.root) == (True, "run 1", str(tmp_path / "it's a root"))
    _, args = parsed(command_line.line("sweep", a="old", b=AWKWARD, device="cpu",
                                       options=[("--filter", "case=abc123abc123"), ("--reports", "all")]))
    assert (args.a, args.b, args.device, args.filter, args.reports) == ("old", AWKWARD, "cpu", ["case=abc123abc123"], "all")
    _, args = parsed(command_line.line("soak", a=AWKWARD, b="new", device="cpu",
                                       options=[("--minutes", "0.5"), ("--seed", "7")]))
    assert (args.a, args.minutes, args.seed) == (AWKWARD, 0.5, 7)


def test_the_five_lines_are_the_ones_they_were_for_plain_names():
    """Byte for byte what each function printed before the builder (names that need no quoting)."""
    cli_args = CONFIG.cli_args()
    assert run_command(CONFIG, "old", "new", ("random", 3)) == f"remap-ab run --a old --b new {cli_args} --schedule random:3"
    assert run_command(CONFIG, GIT, "new") == (f"remap-ab run --a HEAD@{'ab' * 20}:kernels/x.py --b new "
                                               f"--repo '/tmp/the repo' {cli_args}")
    assert replay_command(Path("/tmp/r/abc"), CUSTOM, "new") == (
        "PYTHONPATH='/tmp/my mods'${PYTHONPATH:+:$PYTHONPATH} remap-ab replay /tmp/r/abc")
    case = rejections.load()[0]
    assert rejections.run_line(case, "old", "new", "cpu") == f"remap-ab run --rejection {case.id} --a old --b new --device cpu"
    asked = argparse.Namespace(schedule=None, inputs=None, memcheck=True)
    assert run_command_module._again_command(asked, CONFIG, "cpu", ("old", "new")) == (
        f"remap-ab run --a old --b new {cli_args} --device cpu --memcheck")


# -- no other builder ----------------------------------------------------------------

SUBCOMMANDS = "|".join(cli.COMMANDS)
# "remap-ab SUBCOMMAND" running on into an option or a value ("remap-ab sweep: error" is a name).
MENTION = re.compile(rf"(?:^|[\s`(:'\"])remap-ab (?:{SUBCOMMANDS})(?: +[A-Z][A-Z0-9_\[\],.=-]*)*(?: +-[^`)]*)? *$")
FRAGMENT = re.compile(rf"\s*remap-ab(?: (?:{SUBCOMMANDS}) *| +)")
# Strings that name the program and are no command line, with why.
NOT_COMMANDS = {("subject.py", "remap-ab soak "): "the seed of a soak worker's draws, hashed"}
# Modules of another engineer's, still building their own line: each must still do so (so
# the list shrinks as they move to the builder), and no other may start.
NOT_YET: set[str] = set()


def built_commands(source: str) -> list[tuple[int, str]]:
    """(line, text) of each place ``source`` builds a remap-ab command line: an f-string that
    runs on from ``remap-ab SUBCOMMAND`` into a value, or the program's name as a fragment
    to be joined to others. A whole literal mention (`remap-ab mutants --list`) is prose."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            for i, part in enumerate(node.values):
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    runs_on = i + 1 < len(node.values) and isinstance(node.values[i + 1], ast.FormattedValue)
                    if runs_on and MENTION.search(part.value):
                        found.append((node.lineno, part.value))
        elif isinstance(node, (ast.BinOp, ast.List, ast.Tuple)):  # the parts of a line joined by hand
            parts = [node.left, node.right] if isinstance(node, ast.BinOp) else node.elts
            found += [(p.lineno, p.value) for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str)
                      and FRAGMENT.fullmatch(p.value)]
    return found


def _scan() -> dict[str, list[tuple[int, str]]]:
    out = {}
    for path in sorted([*PACKAGE.rglob("*.py"), *(REPO / "strategies").rglob("*.py")]):
        if path == PACKAGE / "command_line.py":
            continue
        where = str(path.relative_to(PACKAGE if PACKAGE in path.parents else REPO))
        found = [(n, t) for n, t in built_commands(path.read_text())
                 if not any(where == f and t.lstrip().startswith(p) for f, p in NOT_COMMANDS)]
        if found:
            out[where] = found
    return out


def test_no_module_but_the_builder_builds_a_command_line():
    found = _scan()
    assert {k: v for k, v in found.items() if k not in NOT_YET} == {}
    assert set(found) >= NOT_YET, f"{sorted(NOT_YET - set(found))} use the builder now: drop them from NOT_YET"


@pytest.mark.parametrize("source, builds", [
    ('x = f"remap-ab run --a {a} --b {b}"', True),  # the old rejection line
    ('x = " ".join(p for p in ("remap-ab run", args, f"--a {a}") if p)', True),  # the old memcheck line
    ('x = "remap-ab " + " ".join(argv)', True),
    ('x = f"replay: remap-ab replay {folder}"', True),
    ('x = f"`remap-ab replay ID --a {a}`"', True),  # a placeholder, then values
    ('x = f"remap-ab mutants on {device}: 3 mutants"', False),  # a heading
    ('x = f"unknown id {i}; `remap-ab mutants --list` lists them"', False),  # prose naming a command
    ('x = "see remap-ab run --help"', False),
    ('def f():\n    """remap-ab run makes it."""', False),
])
def test_the_scan_sees_a_hand_made_line(source, builds):
    assert bool(built_commands(source)) is builds
