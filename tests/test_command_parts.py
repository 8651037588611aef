"""A subject's parts of the commands (issues 42 and 61): the modules its ``parts`` names,
composed by the commands through --subject: the default subject's options and help reach
the command, a subject without a part is refused in one line saying what to declare, a
subject of one's own (MODULE:ATTRIBUTE) reaches every command it declares a part of, and
the soak hands the part's options to the subject's soak by their names."""

from __future__ import annotations

import argparse
import shlex
import sys
import textwrap
from pathlib import Path

import pytest

from remap_ab import cli, options, runtime, subjects
from remap_ab.commands import common
from remap_ab.errors import UsageError
from remap_ab.subjects.remap.parts import run_command, soak_command
from remap_ab.subjects.topology import soak_command as topology_soak_command

DEVICE = runtime.default_device()  # in-process commands run where this process already does


def _parsed(words: list[str]) -> argparse.Namespace:
    return cli.build_parser(words[0], words).parse_args(words)


def _description(command: str, words: list[str]) -> str:
    parser = cli.build_parser(command, [command, *words])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return sub.description or ""


@pytest.mark.parametrize("command,target", [("run", []), ("nondet", []), ("resources", [])])
def test_a_subject_without_a_part_is_one_line_exit_2(capsys, command, target):
    assert cli.main([command, "--subject", "topology", *target]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"--subject topology: {command} has no part for this subject (its parts: bench, mutants, replay, soak)" in err
    assert f"declare parts = {{{command!r}: MODULE}} on it" in err


def test_a_subject_of_ones_own_is_told_what_to_declare():
    with pytest.raises(UsageError, match=r"nondet has no part for this subject \(its parts: none\); declare parts"):
        common.subject_part("sums_subject:SUBJECT", "nondet")


# A subject of one's own that borrows the sums subject and declares a part of every
# command: each part prints what reached it, so the test sees the command line's words.
USER_SUBJECT = """
import sums_subject

class Borrowed(type(sums_subject.SUBJECT)):
    parts = {command: "{module}_parts" for command in ("run", "replay", "bench", "mutants", "nondet", "resources")}

SUBJECT = Borrowed()
"""
USER_PARTS = """
DESCRIPTION = "the user's part"

def add_arguments(p, groups=None):
    p.add_argument("--word", default="none")

def main(args, session=None):
    print(f"reached {args.command} of {args.subject}: word {getattr(args, 'word', '-')}")
    return 0
"""


@pytest.fixture
def user_subject(tmp_path, monkeypatch):
    (tmp_path / "my_subject.py").write_text(USER_SUBJECT.replace("{module}", "my_subject"))
    (tmp_path / "my_subject_parts.py").write_text(textwrap.dedent(USER_PARTS))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_subject:SUBJECT"
    for name in ("my_subject", "my_subject_parts"):
        sys.modules.pop(name, None)


@pytest.mark.parametrize("command", ["run", "nondet", "resources"])
def test_a_subject_of_ones_own_reaches_the_commands_it_declares_a_part_of(user_subject, capsys, command):
    assert cli.main([command, "--subject", user_subject, "--word", "seven"]) == 0
    assert capsys.readouterr().out == f"reached {command} of {user_subject}: word seven\n"
    assert "the user's part" in _description(command, ["--subject", user_subject])


def test_a_subject_of_ones_own_reaches_replay_bench_and_mutants(user_subject, capsys):
    assert cli.main(["replay", "--subject", user_subject, "0123456789ab"]) == 0
    assert capsys.readouterr().out == f"reached replay of {user_subject}: word -\n"
    assert cli.main(["bench", "--subject", user_subject, "--device", DEVICE, "--word", "w"]) == 0
    assert capsys.readouterr().out == f"reached bench of {user_subject}: word w\n"
    # A mutants part with a main runs its own kill loop (as a declared subject's does).
    assert cli.main(["mutants", "--subject", user_subject, "--list"]) == 0
    assert capsys.readouterr().out == f"reached mutants of {user_subject}: word -\n"


def test_the_packaged_subjects_are_the_entry_points_pyproject_declares():
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["entry-points"][subjects.GROUP]
    folders = {p.parent.name for p in (root / "remap_ab" / "subjects").glob("*/subject.py")}
    assert set(declared) == folders and declared == {n: f"remap_ab.subjects.{n}.subject:SUBJECT" for n in folders}
    assert subjects.packaged() == declared and subjects.names()[0] == subjects.DEFAULT
    assert {n: subjects.get(n).name for n in declared} == {n: n for n in declared}


def test_without_the_entry_points_in_its_metadata_a_checkout_still_knows_its_own(monkeypatch):
    # As in a checkout whose metadata predates the group (a stale remap_ab.egg-info in the
    # working folder is read first): the packages beside subjects/__init__.py.
    from importlib import metadata

    monkeypatch.setattr(metadata, "entry_points", lambda group: [])
    subjects.packaged.cache_clear()
    try:
        assert subjects.packaged() == {n: f"remap_ab.subjects.{n}.subject:SUBJECT" for n in ("remap", "slotmap", "topology")}
    finally:
        subjects.packaged.cache_clear()


def test_the_default_subjects_run_part_gives_its_options_and_paragraph():
    args = _parsed(["run", "--topk", "256", "--tokens", "2"])
    assert args.subject == "remap" and run_command.config_from_args(args).topk == 256
    assert run_command.DESCRIPTION in _description("run", [])
    with pytest.raises(SystemExit) as stopped:  # without the part, its options are unknown
        _parsed(["run", "--subject", "topology", "--topk", "256"])
    assert stopped.value.code == 2


def test_the_soak_hands_its_subjects_options_by_name():
    args = _parsed(["soak", "--minutes", "1", "--max-tokens", "8", "--max-topk", "512"])
    assert args._subject_options == ("max_tokens", "max_topk")
    assert (args.max_tokens, args.max_topk) == (8, 512)
    # The topology's part: the shared size cap (its flag, dest max_size) and its own topk cap.
    args = _parsed(["soak", "--subject", "topology", "--minutes", "1", options.MAX_SIZE.flag, "300"])
    assert args._subject_options == ("max_size", "max_topk") and args.max_size == 300
    assert args._subject_flags == {"max_size": options.MAX_SIZE.flag, "max_topk": "--max-topk"}
    assert topology_soak_command.DESCRIPTION in _description("soak", ["--subject", "topology"])
    assert soak_command.DESCRIPTION not in _description("soak", ["--subject", "topology"])
    # A subject without a soak part of its own takes the default's.
    args = _parsed(["soak", "--subject", "sums_subject:SUBJECT", "--minutes", "1", "--max-tokens", "300"])
    assert args._subject_options == ("max_tokens", "max_topk") and args.max_tokens == 300


def test_the_size_cap_is_the_default_subjects_flag_and_the_sweeps_max_size():
    assert _parsed(["sweep", options.MAX_SIZE.flag, "3"]).max_size == 3
    assert options.MAX_SIZE.flag == "--max-tokens" and options.MAX_SIZE.plugin == "--remap-grid-max-tokens"


def test_a_subject_without_a_listing_lists_its_points_by_id_and_labels(capsys):
    assert cli.main(["sweep", "--list", "--subject", "sums_subject:SUBJECT", "--filter", "step=2", "--device", "cpu"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 6 and all(line.endswith(" step=2") and len(line.split()[0]) == 12 for line in lines)
    assert err == "listed 6 cases of 12: what `sweep --subject sums_subject:SUBJECT` runs on cpu\n"


def test_the_optional_members_defaults(tmp_path, monkeypatch):
    import sums_subject

    from remap_ab.subject import canonical_implementation, replay_line_of

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text("")
    # A file by its absolute path, any other name as given; the subject's own where it declares one.
    assert sums_subject.SUBJECT.implementation("mine.py") == canonical_implementation("mine.py") == str(tmp_path / "mine.py")
    assert sums_subject.SUBJECT.implementation("some.module") == "some.module"
    assert subjects.get("remap").implementation("old") == "old"
    # The generic replay's line, which judges the case again.
    line = replay_line_of(sums_subject.SUBJECT, {"step": 1, "n": 7}, {}, None, "loop", "formula")
    assert line.endswith("""remap-ab replay --subject sums_subject:SUBJECT '{"n": 7, "step": 1}'""")
    assert line.startswith(f"PYTHONPATH={Path(sums_subject.__file__).parent}")  # where the subject's module was found
    assert cli.main(shlex.split(line)[2:]) == 0
    assert replay_line_of(sums_subject.SUBJECT, {"n": 7, "step": 1}, {}, None, "loop", "other").endswith(" --b other")


def test_a_subject_without_a_replay_part_gets_its_case_judged_again_from_json(capsys, monkeypatch):
    import sums_subject

    case = '{"n": 7, "step": 1}'
    assert cli.main(["replay", "--subject", "sums_subject:SUBJECT", case, "--device", DEVICE]) == 0
    assert capsys.readouterr().out.startswith(f"PASS  (case fa5eb92c8ade, A loop, B formula, {DEVICE})\n")
    monkeypatch.setenv(sums_subject.B_WRONG_FROM, "5")
    assert cli.main(["replay", "--subject", "sums_subject:SUBJECT", case, "--device", DEVICE]) == 1
    assert capsys.readouterr().out.startswith("FAIL [b-vs-oracle] B's output out differs from the oracle's")
    for target, says in (("nope", "no case of sums_subject:SUBJECT's grid has this ID"), ('{"x": 1}', "the case has no n")):
        assert cli.main(["replay", "--subject", "sums_subject:SUBJECT", target]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.splitlines()) == 1
