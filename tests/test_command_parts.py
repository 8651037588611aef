"""A subject's parts of run, replay and soak (remap_ab/subjects/NAME/{run,replay,soak}_command.py),
composed by the commands through --subject (issue 42): the default subject's options and
help reach the command, a subject without a part is refused in one line, and the soak
hands the part's options to the subject's soak by their names."""

from __future__ import annotations

import argparse

import pytest

from remap_ab import cli, options
from remap_ab.commands import common
from remap_ab.errors import UsageError
from remap_ab.subjects.remap import run_command, soak_command
from remap_ab.subjects.topology import soak_command as topology_soak_command


def _parsed(words: list[str]) -> argparse.Namespace:
    return cli.build_parser(words[0], words).parse_args(words)


def _description(command: str, words: list[str]) -> str:
    parser = cli.build_parser(command, [command, *words])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return sub.description or ""


@pytest.mark.parametrize("command,target", [("run", [])])
def test_a_subject_without_a_part_is_one_line_exit_2(capsys, command, target):
    assert cli.main([command, "--subject", "topology", *target]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"--subject topology: {command} has no part for this subject" in err and "takes --subject remap" in err


def test_a_subject_of_ones_own_is_told_it_has_no_part():
    with pytest.raises(UsageError, match="has no run_command module"):
        common.subject_part("sums_subject:SUBJECT", "run_command", "run")


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
