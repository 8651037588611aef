"""Every option the command line and the pytest plugin share is declared once, in
remap_ab/options.py, and both parsers are generated from that declaration (issue 42,
part 5): a changed declaration changes both, and no other module of either surface
declares a shared option by hand."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from remap_ab import cli, options
from remap_ab.pytest import plugin

PACKAGE = Path(options.__file__).parent
# The two surfaces: the command line (its dispatcher and subcommands) and the plugin.
SURFACES = [PACKAGE / "cli.py", *sorted((PACKAGE / "commands").glob("*.py")), *sorted((PACKAGE / "pytest").glob("*.py"))]

# Which subcommand shows each shared option with the declaration's own default.
COMMAND_OF = {"--a": "run", "--b": "run", "--repo": "run", "--subject": "sweep", "--filter": "sweep",
              "--max-tokens": "sweep", "--batch": "sweep", "--reports": "sweep", "--fail-slower": "bench"}
# A surface's own default, passed at the call site (OPTION.but(default=...)), with why.
CLI_DEFAULT = {"--reports": None}  # None: the resumed run's own setting, else the declared default
PLUGIN_DEFAULT = {"--fail-slower": "off"}  # the property suite's speed gate is off unless asked for
# ... and how its help words the default (from the declaration where it can).
CLI_TEXT = {"--reports": lambda o: f"{o.default}; with --resume, the run's own"}
PLUGIN_TEXT = {"--fail-slower": lambda o: "off", "--batch": lambda o: "64 on cuda, 16 on cpu"}  # the grid's batch
# Same flag, another meaning: soak batches its quiet GPU cases (its --max-tokens, the
# largest drawn, is the remap subject's soak part's: subjects/remap/parts/soak_command.py).
OTHER_MEANING = {("soak.py", "--batch")}


def cli_actions(command: str) -> dict[str, argparse.Action]:
    parser = cli.build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return {flag: a for a in sub._actions for flag in a.option_strings}


class PluginParser(argparse.ArgumentParser):
    """pytest's option parser as the plugin sees it (its addoption is argparse's)."""

    def getgroup(self, name, description=""):
        return self

    def addoption(self, *names, **attrs):
        self.add_argument(*names, **attrs)


def plugin_actions() -> dict[str, argparse.Action]:
    parser = PluginParser(add_help=False)
    plugin.pytest_addoption(parser)
    return {flag: a for a in parser._actions for flag in a.option_strings}


def test_every_shared_option_is_on_both_surfaces():
    assert set(COMMAND_OF) == {o.flag for o in options.SHARED}
    cli_flags = {flag for command in set(COMMAND_OF.values()) for flag in cli_actions(command)}
    assert {o.flag for o in options.SHARED} <= cli_flags
    assert {o.plugin for o in options.SHARED} <= set(plugin_actions())


@pytest.mark.parametrize("declared", options.SHARED, ids=lambda o: o.flag)
def test_both_parsers_come_from_the_one_declaration(declared, monkeypatch):
    name = next(k for k, v in vars(options).items() if v is declared)

    def validator(text):  # a new type= object: both parsers must hold this very one
        return text

    default = declared.default
    if isinstance(default, str) or isinstance(default, int):
        default = "marker" if isinstance(default, str) else default + 2
    changed = declared.but(help=declared.help + " MARKER", default_text="MARKED", default=default,
                           choices=(*declared.choices, "marker") if declared.choices else None,
                           type=validator if declared.type or declared.action is None else None)
    monkeypatch.setattr(options, name, changed)
    if declared.env:
        monkeypatch.delenv(declared.env, raising=False)
    on_cli, on_plugin = cli_actions(COMMAND_OF[declared.flag])[declared.flag], plugin_actions()[declared.plugin]
    for action in (on_cli, on_plugin):
        assert action.help is not None and action.help.endswith("MARKER")
        assert action.choices == changed.choices and action.type is changed.type
        assert action.metavar == changed.metavar
    # The same words, but the plugin names its own flags (--remap-repo where the CLI says --repo).
    words = {surface: changed.but(default_text=texts[declared.flag](changed)) if declared.flag in texts else changed
             for surface, texts in (("cli", CLI_TEXT), ("plugin", PLUGIN_TEXT))}
    assert on_cli.help == words["cli"].help_text()
    renamed = words["plugin"].help_text()
    for other in options.SHARED:
        renamed = re.sub(rf"{other.flag}(?![\w-])", str(other.plugin), renamed)
    assert on_plugin.help == renamed
    as_parsed = list(changed.default) if changed.action == "append" else changed.default
    assert on_cli.default == CLI_DEFAULT.get(declared.flag, as_parsed)
    assert on_plugin.default == PLUGIN_DEFAULT.get(declared.flag, as_parsed)


def test_help_and_defaults_stay_what_they_were():
    """The command line's wording is the declaration's (unchanged by the move); the
    plugin's defaults and environment variables are what they were."""
    run, sweep = cli_actions("run"), cli_actions("sweep")
    assert run["--a"].help.startswith("implementation A: old, new, oracle") and run["--a"].help.endswith("(default old)")
    assert sweep["--a"].default is None and sweep["--a"].help.endswith(
        "(default the subject's: old for the remap, a for topology; with --resume, the run's own)")
    assert sweep["--max-tokens"].help == "skip grid points with more than N token rows (default: none; 3 keeps 576 of 1728)"
    assert sweep["--reports"].help.count("(default 3; with --resume, the run's own)") == 1
    pytest_side = plugin_actions()
    assert pytest_side["--remap-grid-batch"].help == "cases per batch (default 64 on cuda, 16 on cpu)"
    assert pytest_side["--remap-grid-report-cases"].default == options.DEFAULT_REPORTS
    assert "--remap-repo" in pytest_side["--remap-a"].help and "--repo" not in pytest_side["--remap-a"].help


def test_the_new_subject_option():
    sweep, pytest_side = cli_actions("sweep")["--subject"], plugin_actions()["--remap-subject"]
    for action in (sweep, pytest_side):
        assert action.default == "remap" and action.help.startswith("the kernel pair under test: remap, slotmap, topology, or ")
    assert cli.build_parser("sweep").parse_args(["sweep", "--subject", "topology"]).subject == "topology"
    # Any MODULE:ATTRIBUTE parses; subjects.get refuses a name that is neither (one line, exit 2).
    assert cli.build_parser("sweep").parse_args(["sweep", "--subject", "pkg.mod:S"]).subject == "pkg.mod:S"
    assert cli.main(["sweep", "--subject", "nonesuch", "--list"]) == 2


def test_environment_variables_set_the_plugins_defaults_only(monkeypatch):
    monkeypatch.setenv("REMAP_AB_A", "oracle")
    monkeypatch.setenv("REMAP_AB_FAIL_SLOWER", "7%")
    pytest_side = plugin_actions()
    assert pytest_side["--remap-a"].default == "oracle" and pytest_side["--remap-b"].default == "new"
    assert pytest_side["--remap-fail-slower"].default == "7%"
    assert cli_actions("run")["--a"].default == "old"  # the command line takes the flag, as before
    assert cli_actions("bench")["--fail-slower"].default == "5%"


def test_the_plugin_validates_as_the_command_line_does():
    parser = PluginParser(add_help=False, exit_on_error=False)
    plugin.pytest_addoption(parser)
    for bad in (["--remap-grid-max-tokens", "0"], ["--remap-grid-batch", "0"]):
        with pytest.raises((argparse.ArgumentError, SystemExit)):
            parser.parse_args(bad)
    assert parser.parse_args(["--remap-grid-max-tokens", "3"]).remap_grid_max_tokens == 3


def _declared_flags(tree: ast.AST) -> list[tuple[str, int]]:
    """The string flags of every add_argument/addoption call in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("add_argument", "addoption"):
            found += [(a.value, node.lineno) for a in node.args
                      if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")]
    return found


def test_no_surface_declares_a_shared_option_outside_options_py():
    shared = {o.flag for o in options.SHARED} | {o.plugin for o in options.SHARED}
    outside = [f"{path.relative_to(PACKAGE)}:{line}: {flag}" for path in SURFACES
               for flag, line in _declared_flags(ast.parse(path.read_text()))
               if flag in shared and (path.name, flag) not in OTHER_MEANING]
    assert outside == []
    # The exemptions are true (soak still has its own) and the scan sees a hand-made one.
    soak = _declared_flags(ast.parse((PACKAGE / "commands" / "soak.py").read_text()))
    assert {flag for flag, _ in soak} >= {flag for _, flag in OTHER_MEANING}
    planted = ast.parse('group.addoption("--remap-grid-batch", type=int)\np.add_argument("--subject")')
    assert {flag for flag, _ in _declared_flags(planted)} <= shared
