"""The README's two set-up commands: the main job installs the tool alone, the tests add
the test extra, and CI (.ci/run) runs them as written."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _setup_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block is not None
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_opens_with_exactly_two_set_up_commands():
    main_job, tests = _setup_commands()
    assert main_job == "pip install -c constraints/cpu.txt -e . && remap-ab sweep"
    assert tests == "pip install -c constraints/cpu.txt -e '.[test]' && ruff check . && mypy && pytest -n auto"


def test_ci_runs_the_readme_set_up_commands():
    # .ci/run reads them from the README itself: the main job's install, then every
    # command of the test line, verbatim.
    main_job, tests = _setup_commands()
    ci = subprocess.run(["bash", str(REPO / ".ci" / "run"), "--commands"], capture_output=True, text=True, timeout=60)
    assert ci.returncode == 0, ci.stderr
    assert ci.stdout.splitlines() == [main_job.split(" && ")[0], *tests.split(" && ")]


def test_the_readme_keeps_no_history():
    text = (REPO / "README.md").read_text()
    for history in ("before this round", "the lock below", "nvidia-h200", "Measured on 20"):
        assert history not in text, history
