"""Every default a command's --help states is the one the command uses (issue 60, item 6).

Each command's parser is built (for the default subject and, where it takes one, with
``--subject topology``) and each option's help read as --help prints it:

- an option whose parser default is a value: the help's "default X" must be that value
  (a list's text, or "all" for a list of several, or "FIRST ... LAST" for its ends);
- an option decided later (parser default None) whose help states a number: that number
  must be what the code decides, read here from the constant or function the command
  uses (``DECIDED``); a number no entry checks fails, so a new one cannot go unchecked.

``bench --sections pr`` ran 10 repeats where --repeats' help promised 20 for pr alone:
the first test below is that bug.
"""

from __future__ import annotations

import argparse
import dataclasses
import re

import pytest

from remap_ab import cli, replays
from remap_ab.bench import pairs
from remap_ab.report_cap import DEFAULT_REPORTS
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.judge import nondet
from remap_ab.subjects.remap.parts import soak as remap_soak
from remap_ab.subjects.remap.parts.bench import command as remap_bench
from remap_ab.subjects.remap.parts.bench.suite import DET_RUNS, DET_TOKENS, SECTIONS, parse_sections
from remap_ab.subjects.topology import soak_command as topology_soak_command
from remap_ab.subjects.topology.config import TOPK_DOMAIN
from remap_ab.sweep.run import DEFAULT_CASE_TIMEOUT, GPU_BATCH

STATED = re.compile(r"\bdefault:? (?P<value>[^\s;()]+(?: \.\.\. [^\s;()]+)?)")


def test_bench_sections_pr_runs_the_repeats_the_help_promises():
    assert remap_bench.default_repeats(parse_sections("pr")) == remap_bench.PR_ALONE_REPEATS == 20
    assert remap_bench.default_repeats(list(remap_bench.DEFAULT_SECTIONS)) == 20  # pr and resources (untimed)
    assert remap_bench.default_repeats(parse_sections("pr,contention")) == remap_bench.OTHER_REPEATS == 10
    assert remap_bench.default_repeats(list(SECTIONS)) == 10  # --all


def _numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"(?<![\w.])\d+(?![\w.])", text)]


def _clause(help_text: str) -> str:
    """The help's words from "default" to the end of its parenthesis."""
    start = help_text.index("default")
    depth, end = 0, len(help_text)
    for i, ch in enumerate(help_text[start:], start):
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                end = i
                break
            depth -= 1
    return help_text[start:end]


# (command, subject, flag) -> the numbers its help's default clause must state, in order.
DECIDED = {
    ("bench", "remap", "--repeats"): [remap_bench.PR_ALONE_REPEATS, remap_bench.OTHER_REPEATS],
    ("bench", "topology", "--repeats"): [pairs.DEFAULT_REPEATS],
    ("bench", "remap", "--det-tokens"): [*DET_TOKENS["cuda"], *DET_TOKENS["cpu"]],
    ("bench", "remap", "--det-runs"): [DET_RUNS["cuda"], DET_RUNS["cpu"]],
    ("bench", "remap", "--host-calls"): [remap_bench.HOST_CALLS["cuda"], remap_bench.HOST_CALLS["cpu"]],
    ("soak", "remap", "--max-tokens"): [remap_soak.GPU_MAX_TOKENS, remap_soak.CPU_MAX_TOKENS],
    ("soak", "remap", "--max-topk"): [remap_soak.MAX_TOPK],
    ("soak", "topology", "--max-tokens"): [topology_soak_command.GPU_MAX_ROWS, topology_soak_command.CPU_MAX_ROWS,
                                           topology_soak_command.CPU_WIDE_ROWS, topology_soak_command.WIDE_TOPK],
    ("soak", "topology", "--max-topk"): [max(TOPK_DOMAIN)],
    ("soak", "remap", "--fresh-every"): [remap_soak.GPU_FRESH_EVERY, 1],
    ("soak", "topology", "--fresh-every"): [remap_soak.GPU_FRESH_EVERY, 1],
    ("soak", "remap", "--reports"): [DEFAULT_REPORTS],
    ("soak", "topology", "--reports"): [DEFAULT_REPORTS],
    ("sweep", "remap", "--reports"): [DEFAULT_REPORTS],
    ("sweep", "topology", "--reports"): [DEFAULT_REPORTS],
    ("replay", "remap", "--repeat"): [replays.DEFAULT_AFTER_FAILURE, 1],
    ("replay", "topology", "--repeat"): [replays.DEFAULT_AFTER_FAILURE, 1],
    ("history", "remap", "--reports"): [DEFAULT_REPORTS],
    ("history", "topology", "--reports"): [DEFAULT_REPORTS],
    ("history", "remap", "--batch"): [GPU_BATCH, 1],
    ("history", "topology", "--batch"): [GPU_BATCH, 1],
    ("history", "remap", "--case-timeout"): [int(DEFAULT_CASE_TIMEOUT)],
    ("history", "topology", "--case-timeout"): [int(DEFAULT_CASE_TIMEOUT)],
    ("sweep", "remap", "--batch"): [GPU_BATCH, 1],
    ("sweep", "topology", "--batch"): [GPU_BATCH, 1],
    ("sweep", "remap", "--case-timeout"): [int(DEFAULT_CASE_TIMEOUT)],
    ("sweep", "topology", "--case-timeout"): [int(DEFAULT_CASE_TIMEOUT)],
    ("nondet", "remap", "--tokens"): _numbers(nondet.GPU_DEFAULT_TOKENS) + _numbers(nondet.CPU_DEFAULT_TOKENS),
    ("nondet", "topology", "--tokens"): _numbers(nondet.GPU_DEFAULT_TOKENS) + _numbers(nondet.CPU_DEFAULT_TOKENS),
}
CASE_DEFAULTS = {f.name: [f.default] for f in dataclasses.fields(CaseConfig)
                 if isinstance(f.default, (int, float)) and not isinstance(f.default, bool)}
# Decided inline where no constant can be read; said here, not checked.
UNCHECKED = {
    ("nondet", "--runs"): "commands/nondet.main: 20 if on_gpu else 8",
}


def _options(command: str, subject: str):
    words = [command] + (["--subject", subject] if subject != "remap" else [])
    parser = cli.build_parser(command, words)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    formatter = sub._get_formatter()
    for action in sub._actions:
        if action.help and action.help != argparse.SUPPRESS and action.option_strings:
            yield action, formatter._expand_help(action)


def _flag(action) -> str:
    return max(action.option_strings, key=len)


def _as_text(default) -> str:
    return ",".join(map(str, default)) if isinstance(default, (list, tuple)) else str(default)


def _agrees(stated: str, default) -> bool:
    text = _as_text(default)
    values = text.split(",")
    if stated == text:
        return True
    if stated == "all":
        return len(values) > 1
    if " ... " in stated:
        first, last = stated.split(" ... ")
        return (values[0], values[-1]) == (first, last)
    try:
        return float(stated.rstrip("%")) == float(text.rstrip("%"))
    except ValueError:
        return False


@pytest.mark.parametrize("command", list(cli.COMMANDS))
@pytest.mark.parametrize("subject", ["remap", "topology"])
def test_every_stated_default_is_the_default_used(command, subject):
    wrong, unchecked = [], []
    for action, text in _options(command, subject):
        flag = _flag(action)
        for m in STATED.finditer(text):
            stated = m["value"].rstrip(",:.")
            if action.default is not None and not isinstance(action.default, bool):
                if not _agrees(stated, action.default):
                    wrong.append(f"{flag}: the help says default {stated!r}, the parser's is {_as_text(action.default)!r}")
                continue
            if not stated[0].isdigit() or (command, flag) in UNCHECKED:
                continue  # words (the subject's, the report's, a random one), or said above
            want = DECIDED.get((command, subject, flag))
            if want is None and command == "run" and subject == "remap" and action.dest in CASE_DEFAULTS:
                want = CASE_DEFAULTS[action.dest]  # a case's option: its CaseConfig field's default
            if want is None:
                unchecked.append(f"{flag}: states {stated!r}, decided later, and no DECIDED entry checks it")
            elif _numbers(_clause(text)) != want and [float(stated)] != want:
                wrong.append(f"{flag}: the help's default clause {_clause(text)!r} states {_numbers(_clause(text))}, "
                             f"the code uses {want}")
            break
    assert not wrong and not unchecked, "; ".join(wrong + unchecked)


def test_the_check_catches_a_wrong_default():
    parser = argparse.ArgumentParser()
    action = parser.add_argument("--n", type=int, default=10, help="repeats (default 20)")
    stated = STATED.search(parser._get_formatter()._expand_help(action))["value"]
    assert not _agrees(stated, action.default) and _agrees("10", action.default)
    assert _agrees("all", ["a", "b"]) and not _agrees("all", ["a"]) and _agrees("1 ... 3", [1, 2, 3])
    assert _numbers(_clause("x (default 20 when pr alone; 10 with --all) y")) == [20, 10]
