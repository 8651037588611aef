"""Failing-case reports (write_case_report, the API the property suite uses; crash and
timeout reports; reading them back; replay), and the batched proof of passing that lets
the sweep skip compare() for passing cases."""

import ast
import base64
import io
import json
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from remap_ab.errors import PlotsUnavailable, ReportError
from remap_ab.status import Status
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs, tensor_sha256
from remap_ab.subjects.remap.judge.compare import OrderContract, Output, compare, proof_of_pass
from remap_ab.subjects.remap.judge.runner import CaseResult, reference
from remap_ab.subjects.remap.report.report import (
    build_case_report,
    load_report,
    render,
    write_case_report,
    write_crash_report,
)

CFG = CaseConfig(mode="dcp", tokens=3, topk=512, dcp_size=2, compact=False, counts=True, invalid_ratio=0.3)


def _result(config, tamper=None):
    """A CaseResult built from the oracle (no kernels: fast), optionally tampered."""
    inputs = generate_inputs(config)
    ref = reference(config, inputs)
    contract = OrderContract(True, config.topk, "reference")
    a = Output("old", ref.out.clone(), ref.counts.clone(), contract)
    b = Output("new", ref.out.clone(), ref.counts.clone(), contract)
    if tamper:
        tamper(b)
    v = compare(config.case_id, a, b, ref, compacted=config.compacts, counts_returned=config.counts_returned)
    o = Output("oracle", ref.out.clone(), ref.counts.clone(), contract)
    return CaseResult(config, inputs, a, b, ref, v, oracle=o)


def _bump(o):
    r, c = (o.out >= 0).nonzero()[3].tolist()
    o.out[r, c] += 7
    o.counts[2] += 1


def _needs_matplotlib():
    pytest.importorskip("matplotlib", reason="pictures need the plots extra: pip install 'remap-ab[plots]'")


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def _embedded_png(html: str) -> bytes:
    return base64.b64decode(html.split("data:image/png;base64,")[1].split('"')[0])




def test_write_case_report_round_trip(tmp_path):
    result = _result(CFG, _bump)
    assert result.verdict.status == "fail"
    folder = write_case_report(result, tmp_path / "run")
    assert folder == tmp_path / "run" / CFG.case_id
    rep = load_report(folder)
    assert rep.config == CFG
    assert torch.equal(rep.inputs.token_indices, result.inputs.token_indices)
    assert rep.verdict.to_dict() == result.verdict.to_dict()
    first = rep.verdict.first
    md = (folder / "diff.md").read_text()
    assert f"at row {first.row}, col {first.col}" in md or f"at row {first.row}" in md
    # Per-row valid counts of A, B and the oracle: row 2's B count is one too many.
    oracle_2 = int(result.reference.counts[2])
    assert f"| 2 | {oracle_2} | {oracle_2 + 1} | {oracle_2} |" in md
    # No whole tensors: the inputs come back from the configuration, the outputs are
    # the rows that differ (rows 2 and the bumped lane's) with each whole tensor's sha256.
    assert not list(folder.glob("*.pt")) and not (folder / "outputs.pt.gz").exists()
    assert rep.meta["inputs"]["source"] == "generated"
    kept = rep.kept_rows()
    bumped = int((result.b.out != result.reference.out).any(dim=1).nonzero()[0])
    assert kept["rows"].tolist() == sorted({2, bumped}) and rep.outputs["rows_differing"] == len({2, bumped})
    assert set(kept["roles"]) == {"a", "b", "reference"}  # the oracle's API equals its reference: not kept twice
    assert torch.equal(kept["roles"]["b"]["out"], result.b.out[kept["rows"]])
    assert torch.equal(kept["roles"]["reference"]["counts"], result.reference.counts[kept["rows"]])
    assert rep.outputs["roles"]["b"]["tensors"]["out"]["sha256"] == tensor_sha256(result.b.out)
    # Rewriting the same case replaces it; no temporary folders are left behind.
    write_case_report(result, tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [CFG.case_id]


def test_tables_agree_with_the_verdicts_first_mismatch():
    result = _result(CFG.replace(tokens=2, topk=128), lambda o: o.out.__setitem__((1, 9), 12345))
    first = result.verdict.first
    assert (first.row, first.col) == (1, 9)
    model = build_case_report(result, Path("/nowhere"))
    lane = model.lanes[0]
    assert (lane.row, lane.col, lane.b, lane.first) == (1, 9, 12345, True)
    assert lane.a == lane.oracle == int(result.reference.out[1, 9])
    assert [(r.row, r.failing, r.first, r.b_lanes) for r in model.rows] == [(0, False, False, 0), (1, True, True, 1)]
    assert model.rows[1].oracle_count == int(result.reference.counts[1])


def test_a_per_row_first_mismatch_is_named_in_the_counts_table():
    result = _result(CFG, lambda o: o.counts.__setitem__(1, o.counts[1] + 2))
    assert (result.verdict.first.check, result.verdict.first.row) == ("counts", 1)
    model = build_case_report(result, Path("/nowhere"))
    assert model.lanes == []  # no lane differs
    assert [r.row for r in model.rows if r.first] == [1]
    md = render(model, "md")
    assert "row 1's valid count" in md and "← the verdict's first mismatch" in md


def test_an_implementation_error_renders_without_lanes(tmp_path):
    def raised(o):
        o.out, o.counts, o.error = None, None, "RuntimeError: boom"

    result = _result(CFG, raised)
    assert result.verdict.status == "error"
    folder = write_case_report(result, tmp_path)
    md = (folder / "diff.md").read_text()
    assert "# case " + CFG.case_id + ": ERROR" in md and "- **FAIL** [error] new raised RuntimeError: boom\n" in md
    # A's values equal the oracle's and B has none: no value section, and the report says exactly that.
    assert "## Valid counts per row" not in md and "## First mismatching lanes" not in md
    assert "old's output equals the oracle's lane for lane" in md and "new returned no output of the oracle's shape" in md
    assert "RuntimeError: boom" in md.split("## Raised", 1)[1]
    assert load_report(folder).status is Status.ERROR
    # Where A's values differ, the counts table shows B's as dashes, not zeros.
    result.a.counts[0] += 1
    md = render(build_case_report(result, tmp_path), "md")
    oracle_0 = int(result.reference.counts[0])
    assert f"| 0 | {oracle_0 + 1} | — | {oracle_0} | 0 | — |" in md
    # Neither returned an output: nothing to compare, said for both.
    result.a.out, result.a.counts, result.a.error = None, None, "RuntimeError: boom"
    model = build_case_report(result, tmp_path)
    assert model.png is None and "old returned no output of the oracle's shape to compare" in render(model, "md")


def test_a_count_failure_is_worded_in_rows_whose_count_differs_everywhere(tmp_path):
    def count_off(o):
        o.counts[2] += 1

    result = _result(CFG, count_off)
    line = ("[counts] new: valid count differs from the oracle at row 2 "
            f"(old={int(result.reference.counts[2])}, new={int(result.reference.counts[2]) + 1}, "
            f"oracle={int(result.reference.counts[2])}); 1 row whose count differs")
    assert result.verdict.first.line() == line
    folder = write_case_report(result, tmp_path)
    md, html = (folder / "diff.md").read_text(), (folder / "diff.html").read_text()
    assert f"- **FAIL** {line}\n" in md
    assert "## Output lanes (none differs from the oracle's)\n" in md
    assert "## Valid counts per row (1 of 3 rows fails, 1 row whose count differs;" in md
    assert "<h2>Output lanes</h2>" in html
    assert "1 of 3 rows fails, 1 row whose count differs; shown:" in html
    for text in (md, html):  # no lane count contradicts the verdict
        assert "lane in" not in text and "0 lanes differ" not in text


def test_plurals_are_right():
    result = _result(CFG.replace(tokens=1, topk=128), lambda o: o.out.__setitem__((0, 5), 12345))
    model = build_case_report(result, Path("/nowhere"))
    for text in (render(model, "md"), render(model, "html")):
        assert "1 lane in 1 row differs" in text and "1 lane differs from" in text
        assert "1 lanes" not in text and "1 rows" not in text


def test_html_is_self_contained_with_a_decodable_picture(tmp_path):
    _needs_matplotlib()
    from matplotlib import image

    folder = write_case_report(_result(CFG, _bump), tmp_path)
    html = (folder / "diff.html").read_text()
    assert "http://" not in html.replace('http://www.w3.org', '') and "https://" not in html and "<script" not in html
    data = _embedded_png(html)
    pixels = image.imread(io.BytesIO(data), format="png")
    assert pixels.shape[0] > 100 and pixels.shape[1] > 500
    assert (folder / "lanes.png").read_bytes() == data
    assert "![where lanes differ from the oracle](lanes.png)" in (folder / "diff.md").read_text()


def test_a_one_row_case_is_drawn_tall_enough_to_see(tmp_path):
    _needs_matplotlib()
    result = _result(CFG.replace(tokens=1, topk=2048), lambda o: o.out.__setitem__((0, 5), 12345))
    model = build_case_report(result, tmp_path)
    width, height = _png_size(model.png)
    # Overview and zoom: a single differing lane is ringed and shown lane by lane.
    assert width >= 800 and height >= 250


def test_without_matplotlib_the_report_says_so_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    folder = write_case_report(_result(CFG, _bump), tmp_path)
    html = (folder / "diff.html").read_text()
    md = (folder / "diff.md").read_text()
    assert "data:image/png" not in html and not (folder / "lanes.png").exists()
    for text in (__import__("html").unescape(html), md):
        line = next(x for x in text.splitlines() if "no picture" in x)
        assert "matplotlib is not installed" in line and "pip install 'remap-ab[plots]'" in line


def test_bar_chart_without_matplotlib_gives_the_install_hint(tmp_path, monkeypatch):
    from remap_ab.bench.charts import bar_chart

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(PlotsUnavailable, match=r"pip install 'remap-ab\[plots\]'"):
        bar_chart(tmp_path / "c", "t", ["g"], {"old": [1.0]}, "µs")
    assert not list(tmp_path.iterdir())


def test_passing_result_crash_and_timeout_reports(tmp_path):
    folder = write_case_report(_result(CFG), tmp_path)
    assert load_report(folder).verdict.status == "pass"
    crash = write_crash_report(CFG, "old", "new", "worker killed by signal SIGSEGV", tmp_path / "c")
    rep = load_report(crash)
    assert rep.verdict.status == Status.CRASH and "SIGSEGV" in rep.verdict.first.message
    assert "The worker process running this case died" in (crash / "diff.html").read_text()
    timeout = write_crash_report(CFG, "old", "new", "no verdict within 30 s", tmp_path / "t", "cpu", status=Status.TIMEOUT)
    rep = load_report(timeout)
    assert rep.status is Status.TIMEOUT and rep.verdict.first.check == "timeout"
    md = (timeout / "diff.md").read_text()
    assert "# case " + CFG.case_id + ": TIMEOUT" in md and "did not finish within its time limit" in md
    # Crash and case reports share one header: the same keys in verdict.json.
    assert set(json.loads((crash / "verdict.json").read_text())) == set(json.loads((folder / "verdict.json").read_text()))
    with pytest.raises(ValueError):
        write_crash_report(CFG, "old", "new", "x", tmp_path / "p", status=Status.PASS)


def test_report_does_not_reach_up_into_the_registry_or_sys_modules():
    from remap_ab.subjects.remap.report import report

    tree = ast.parse(Path(report.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    remap = "remap_ab.subjects.remap"
    assert not {"sys", f"{remap}.registry", f"{remap}.runner", f"{remap}.batch", "remap_ab.sweep.run"} & imported


# --- corrupt reports: one line naming the file and the field, exit 2 -------------------


def _edit_json(folder, name, edit):
    data = json.loads((folder / name).read_text())
    edit(data)
    (folder / name).write_text(json.dumps(data))


CORRUPTIONS = [
    ("verdict.json", lambda d: d.update(status=5), "'status' is int"),
    ("verdict.json", lambda d: d.update(status="maybe"), "'status' is str 'maybe', expected one of pass"),
    ("verdict.json", lambda d: d["b"].update(name=None), "'b.name' is NoneType"),
    ("verdict.json", lambda d: d["a"].update(path_entry=7), "'a.path_entry' is int"),
    ("verdict.json", lambda d: d.pop("a"), "field 'a' is missing"),
    ("verdict.json", lambda d: d["a"].update(source={"kind": "file", "path": "/k.py", "sha256": 3}),
     "'a.source.sha256' is int 3, expected a string"),
    ("verdict.json", lambda d: d["b"].update(source={"kind": "file", "path": "/k.py", "sha256": "0", "colour": 1}),
     "'b.source.colour' is not a known field"),
    ("verdict.json", lambda d: d.update(inputs_sha256=[]), "'inputs_sha256' is list"),
    ("verdict.json", lambda d: d.update(schedule="abc"), "'schedule' is str"),
    ("verdict.json", lambda d: d["verdict"]["failures"][0].update(row="0"), "'verdict.failures[0].row' is str"),
    ("verdict.json", lambda d: d["verdict"]["failures"][0].update(lanes=True), "'verdict.failures[0].lanes' is bool"),
    ("verdict.json", lambda d: d["verdict"].update(failures={}), "'verdict.failures' is dict"),
    ("verdict.json", lambda d: d["verdict"].update(info=[3]), "'verdict.info[0]' is int"),
    ("config.json", lambda d: d.update(case_id=5), "'case_id' is int"),
    ("config.json", lambda d: d.update(config=[]), "'config' is list"),
    ("config.json", lambda d: d["config"].update(tokens="3"), "'config.tokens' is str"),
    ("config.json", lambda d: d["config"].update(compact=1), "'config.compact' is int"),
    ("config.json", lambda d: d["config"].update(invalid_ratio=None), "'config.invalid_ratio' is NoneType"),
    ("config.json", lambda d: d["config"].update(mode="sideways"), "config.json field 'config' holds no valid configuration"),
]


@pytest.fixture(scope="module")
def failing_report(tmp_path_factory):
    """One failing report, written once; tests that damage it work on copies."""
    return write_case_report(_result(CFG, _bump), tmp_path_factory.mktemp("written"))


def _copy(report, tmp_path) -> Path:
    return Path(shutil.copytree(report, tmp_path / report.name))


@pytest.mark.parametrize("name, edit, needle", CORRUPTIONS, ids=[c[2] for c in CORRUPTIONS])
def test_wrong_typed_fields_are_named(tmp_path, failing_report, name, edit, needle):
    folder = _copy(failing_report, tmp_path)
    _edit_json(folder, name, edit)
    with pytest.raises(ReportError) as exc:
        load_report(folder)
    message = str(exc.value)
    assert name in message and needle in message and "\n" not in message


@pytest.mark.parametrize("missing", ["config.json", "verdict.json", "rows.pt.gz"])
def test_missing_files_are_named(tmp_path, failing_report, missing):
    folder = _copy(failing_report, tmp_path)
    (folder / missing).unlink()
    with pytest.raises(ReportError, match=f"{missing} is missing"):
        load_report(folder)


def test_load_report_errors_are_one_line(tmp_path):
    folder = write_case_report(_result(CFG), tmp_path)
    (folder / "verdict.json").write_text("{not json")
    with pytest.raises(ReportError, match="verdict.json is not valid JSON"):
        load_report(folder)
    (folder / "config.json").write_text(json.dumps({"case_id": "000000000000", "config": CFG.to_dict()}))
    with pytest.raises(ReportError, match="config.json says case 000000000000") as exc:
        load_report(folder)
    assert "\n" not in str(exc.value)
    with pytest.raises(ReportError, match="no report"):
        load_report(tmp_path / "missing")


@pytest.mark.parametrize("how", ["path", "case-id"])
def test_replay_of_a_corrupt_report_exits_2_naming_file_and_field(tmp_path, failing_report, capsys, how):
    from remap_ab.cli import main as cli_main

    (tmp_path / "run1").mkdir()
    folder = _copy(failing_report, tmp_path / "run1")
    _edit_json(folder, "verdict.json", lambda d: d["verdict"]["failures"][0].update(col=[1]))
    target = str(folder) if how == "path" else CFG.case_id
    assert cli_main(["replay", target, "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "verdict.json" in err and "'verdict.failures[0].col' is list" in err


def test_replay_root_that_is_a_file_is_a_usage_error(tmp_path, capsys):
    from remap_ab.cli import main as cli_main

    (tmp_path / "afile").write_text("x")
    assert cli_main(["replay", CFG.case_id, "--root", str(tmp_path / "afile")]) == 2
    err = capsys.readouterr().err
    assert "--root" in err and "is a file" in err and len(err.strip().splitlines()) == 1


def test_replay_memcheck_reaches_run_case(tmp_path, monkeypatch, capsys):
    from remap_ab import runtime
    from remap_ab.cli import main as cli_main
    from remap_ab.subjects.remap.judge import runner

    seen = {}
    real = runner.run_case

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    from remap_ab.subjects.remap.parts import replay_command

    monkeypatch.setattr(replay_command, "run_case", spy)  # what the remap's replay calls
    device = runtime.current()  # the session's: a process's Triton backend is fixed (cpu is refused after cuda)
    sanitized = []
    if device == "cuda":
        # What is checked here is replay's --memcheck reaching run_case and each call's
        # memcheck; compute-sanitizer itself (a child that can stall starting CUDA on a
        # loaded GPU) is test_sanitizer.py's. On the CPU the interpreter's check runs.
        from remap_ab.sanitizer import compute as sanitizer
        from remap_ab.sanitizer import memcheck

        def stand_in(impl_name, config, inputs, *, child, timeout_s=0.0):
            sanitized.append(impl_name)
            return memcheck.MemcheckReport(impl_name, source="compute-sanitizer", detail="stand-in: not run")

        monkeypatch.setattr(sanitizer, "check_case", stand_in)
    folder = write_case_report(_result(CFG.replace(tokens=1, topk=128)), tmp_path)
    assert cli_main(["replay", str(folder), "--device", device, "--memcheck"]) == 0
    assert seen.get("memcheck") is True and "with memcheck" in capsys.readouterr().out
    assert set(sanitized) == ({"old", "new"} if device == "cuda" else set())  # on cuda each side reached the sanitizer


# --- a real broken implementation on a custom path -----------------------------------


def test_custom_path_is_recorded_and_replay_suggests_it(tmp_path, broken_impl, capsys):
    from remap_ab import runtime
    from remap_ab.cli import main as cli_main
    from remap_ab.subjects.remap.judge import registry
    from remap_ab.subjects.remap.judge.runner import run_case

    # A real implementation module on a custom path: kernels_new, wrong in one lane.
    name, folder = broken_impl(patch="out = out.clone(); out[0, 5] += 1", name="brk_lane5"), broken_impl.folder
    config = CaseConfig(mode="dcp", tokens=1, topk=128, dcp_size=2, compact=False)
    result = run_case(config, "old", name, device=runtime.select(None))
    assert result.verdict.status == "fail" and (result.verdict.first.row, result.verdict.first.col) == (0, 5)
    report = write_case_report(result, tmp_path / "run", implementations=(registry.get("old"), registry.get(name)))
    meta = json.loads((report / "verdict.json").read_text())
    assert meta["b"] == {"name": name, "module": name, "path_entry": str(folder.resolve())}
    assert meta["a"]["path_entry"] is None and meta["a"]["module"] == "kernels_old"
    assert meta["replay"].startswith(f"PYTHONPATH={folder.resolve()}")
    assert (report / "replay.sh").read_text().count("PYTHONPATH=") == 1
    # In a process that does not have the folder on its path, replay by case ID says
    # which PYTHONPATH entry the report recorded.
    sys.path.remove(str(folder))
    broken_impl.forget()
    assert cli_main(["replay", config.case_id, "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"PYTHONPATH={folder.resolve()}" in err and f"remap-ab replay {config.case_id} --root {tmp_path}" in err


# --- the HTML report in a real browser --------------------------------------------------

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def _browser():
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(f"no headless browser ({', '.join(BROWSERS)}) on PATH: apt-get install chromium")


def _chromium(browser, *args, timeout=120):
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
             "--hide-scrollbars"]
    # No check=True: a failing browser is reported by the assertions on what it wrote.
    return subprocess.run([browser, *flags, *args], capture_output=True, text=True, timeout=timeout, check=False)


# Appended to a copy of the report: the browser's own measure of the page and image.
PROBE = textwrap.dedent("""
    <script>
    window.addEventListener("load", () => {
      const img = document.querySelector("img");
      const pres = [...document.querySelectorAll("pre")];
      document.title = JSON.stringify({
        img: img ? [img.naturalWidth, img.naturalHeight, img.complete] : null,
        page: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
        pre: pres.map(p => p.scrollWidth <= p.clientWidth + 1),
      });
    });
    </script>
""")


@pytest.mark.parametrize("kind", ["one-row", "1024-rows", "crash"])
def test_report_renders_in_headless_chromium(tmp_path, kind):
    browser = _browser()
    if kind != "crash":
        _needs_matplotlib()
        tokens, row = (1, 0) if kind == "one-row" else (1024, 700)
        result = _result(CFG.replace(tokens=tokens, topk=2048), lambda o: o.out.__setitem__((row, 5), 12345))
        # A long replay path, so that an unwrapped command would run off the page.
        folder = write_case_report(result, tmp_path / ("deep" * 40))
    else:
        folder = write_crash_report(CFG, "old", "new", "worker killed by signal SIGSEGV " + "x" * 300, tmp_path)
    html = folder / "diff.html"
    shot = tmp_path / "shot.png"
    run = _chromium(browser, f"--screenshot={shot}", "--window-size=1280,1400", html.as_uri())
    assert shot.is_file(), run.stderr[-2000:]
    assert _png_size(shot.read_bytes()) == (1280, 1400)

    probe = tmp_path / "probe.html"
    probe.write_text(html.read_text().replace("</body>", PROBE + "</body>"))
    dom = _chromium(browser, "--dump-dom", "--virtual-time-budget=5000", "--window-size=1280,1400", probe.as_uri()).stdout
    facts = json.loads(__import__("html").unescape(dom.split("<title>")[1].split("</title>")[0]))
    scroll_width, client_width = facts["page"]
    assert scroll_width <= client_width, "the page scrolls sideways"
    assert all(facts["pre"]), "a command runs off its box"
    if kind != "crash":
        width, height, complete = facts["img"]
        assert complete and (width, height) == _png_size(_embedded_png(html.read_text()))
    else:
        assert facts["img"] is None


# --- the batched proof of passing ----------------------------------------------------


def _compacted_case(topk=512, tokens=4):
    c = CaseConfig(mode="dcp", tokens=tokens, topk=topk, dcp_size=2, compact=True, counts=True, invalid_ratio=0.3)
    x = generate_inputs(c)
    return c, reference(c, x)


def _segment_swapped(ref, seg):
    """Rows compacted with their tile segments in reverse order (a legal tiled order)."""
    t, k = ref.out.shape
    out = torch.full_like(ref.out, -1)
    for r in range(t):
        segs = []
        for s in range(0, k, seg):
            vals = ref.lanes[r, s : s + seg][ref.valid[r, s : s + seg]]
            if len(vals):
                segs.append(vals)
        row = torch.cat(segs[::-1]) if segs else ref.out.new_empty(0)
        out[r, : len(row)] = row
    return out


def test_proof_accepts_a_reordered_tiled_compaction():
    c, ref = _compacted_case()
    tiled = OrderContract(False, 128, "4 tiles")
    out = _segment_swapped(ref, 128)
    assert not torch.equal(out, ref.out)
    o = Output("old", out, ref.counts.clone(), tiled)
    assert bool(proof_of_pass(o, ref, c))
    assert compare(c.case_id, o, o, ref, compacted=True, counts_returned=True).passed
    # The same order is a failure for an implementation that promises column order.
    ordered = Output("new", out, ref.counts.clone(), OrderContract(True, 512, "single tile"))
    assert not bool(proof_of_pass(ordered, ref, c))


def _damaged(ref, damage: str):
    """A segment-swapped (admissible) compaction of ``ref``, then ``damage`` done to it:
    "none", or one that ``compare`` must fail. Returns ``(out, counts)``."""
    out = _segment_swapped(ref, 128)
    counts = ref.counts.clone()
    n = int(ref.counts[0])
    if damage == "swap_within_segment":
        out[0, 0], out[0, 1] = out[0, 1].clone(), out[0, 0].clone()
    elif damage == "tail":
        out[0, n] = 5
    elif damage == "count":
        counts[1] += 1
    elif damage == "value":
        out[0, n - 1] += 1
    else:
        assert damage == "none", damage
    return out, counts


@pytest.mark.parametrize("damage", ["swap_within_segment", "tail", "count", "value"])
def test_proof_never_passes_what_compare_fails(damage):
    c, ref = _compacted_case()
    tiled = OrderContract(False, 128, "4 tiles")
    out, counts = _damaged(ref, damage)
    o = Output("old", out, counts, tiled)
    verdict = compare(c.case_id, o, o, ref, compacted=True, counts_returned=True)
    assert not verdict.passed
    assert not bool(proof_of_pass(o, ref, c))


def _batch_proof(o, ref, c):
    """What the batch runner's proofs (equality, then the tile-order witness) say of ``o``."""
    from remap_ab.subjects.remap.judge import batch
    outs, refs = [(o, None, o, None)], [ref]
    proofs = batch._proofs([c], outs, refs, [None], ref.out.device)
    batch._witness_round([c], outs, refs, proofs)
    return proofs[0].passes


@pytest.mark.parametrize("damage", ["none", "swap_within_segment", "tail", "count", "value"])
def test_the_batch_proof_agrees_with_compare(damage):
    c, ref = _compacted_case()
    out, counts = _damaged(ref, damage)
    for contract in (OrderContract(False, 128, "4 tiles"), OrderContract(True, 512, "single tile")):
        o = Output("old", out, counts, contract)
        passed = compare(c.case_id, o, o, ref, compacted=True, counts_returned=True).passed
        assert passed == (damage == "none" and not contract.ordered)
        assert _batch_proof(o, ref, c) == [passed, passed]


def test_proof_accepts_the_old_kernels_output_under_a_reversed_schedule():
    from remap_ab import runtime
    from remap_ab.interpreter.schedule import interpreter_schedule
    from remap_ab.subjects.remap.judge import registry
    from remap_ab.subjects.remap.judge.runner import run_implementation

    if runtime.select(None) != "cpu":
        pytest.skip("program schedules need the interpreter")
    c = CaseConfig(mode="dcp", tokens=2, topk=512, dcp_size=2, compact=True, counts=True, invalid_ratio=0.3)
    x = generate_inputs(c)
    ref = reference(c, x)
    o = run_implementation(registry.get("old"), c, x, schedule=lambda: interpreter_schedule("tiles_reversed"))
    assert not torch.equal(o.out, ref.out)  # the race order, not column order
    assert bool(proof_of_pass(o, ref, c))


def test_batch_verdicts_equal_run_case_verdicts(tmp_path):
    from remap_ab import runtime
    from remap_ab.subjects.remap.grid import grid
    from remap_ab.subjects.remap.judge.batch import run_batch
    from remap_ab.subjects.remap.judge.runner import run_case

    device = runtime.select(None)
    g = grid.load()
    pts = g.select(grid.parse_filters(g, ["tokens=1", "k=128,384", "invalid=0.3", "oor=on", "path=dcp-compact,convert-prefill-counts"]))
    assert len(pts) == 4
    batch = run_batch([p.config for p in pts], "old", "new", device)
    for p, outcome in zip(pts, batch):
        assert outcome.verdict.to_dict() == run_case(p.config, device=device).verdict.to_dict()
        assert outcome.inputs_sha256 and outcome.a_ms is not None


def test_schedule_is_recorded_and_replayed(tmp_path, capsys):
    from remap_ab import runtime
    from remap_ab.cli import main as cli_main

    if runtime.select(None) != "cpu":
        pytest.skip("program schedules need the interpreter")
    folder = write_case_report(_result(CFG.replace(tokens=1, topk=128)), tmp_path, schedule=("tiles_reversed", 0))
    assert json.loads((folder / "verdict.json").read_text())["schedule"] == ["tiles_reversed", 0]
    assert cli_main(["replay", str(folder)]) == 0
    assert "program schedule tiles_reversed:0" in capsys.readouterr().out
