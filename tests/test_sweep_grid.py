"""The grid (remap_ab/subjects/remap/grid/grid.toml): size, distinctness, coverage of SPEC §6, filters."""

import collections

import pytest

from remap_ab.cli import main as cli_main
from remap_ab.errors import ConfigError
from remap_ab.subjects.remap.grid import grid as gridmod
from remap_ab.subjects.remap.judge.rejections import load as rejection_calls


@pytest.fixture(scope="module")
def g():
    return gridmod.load()


def test_list_prints_1728_distinct_ids_and_nothing_else(capsys):
    assert cli_main(["sweep", "--list", "--max-tokens", "1024"]) == 0
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if "rejection=" not in line]  # then the rejection calls
    assert len(lines) == 1728 and len(out.splitlines()) == 1728 + len(rejection_calls())
    ids = [line.split()[0] for line in lines]
    assert len(set(ids)) == 1728
    assert all(len(i) == 12 and int(i, 16) >= 0 for i in ids)


def test_list_leaves_out_the_points_neither_side_can_run(capsys):
    # 262 callers cases pass BLOCK_STRIDE_ROWS or caller-owned buffers: neither old nor new
    # accepts them, so the sweep does not run them, and --list does not list them. (717:
    # 680 calls, 5 points holding the call envelope's other values, envelope.toml, and
    # 32 pairwise cases.)
    assert cli_main(["sweep", "--list", "--grid", "callers", "--device", "cpu"]) == 0
    out, err = capsys.readouterr()
    assert len([line for line in out.splitlines() if "rejection=" not in line]) == 455
    assert ("262 selected configurations not listed: they pass a parameter that neither A (old) nor B (new) takes on "
            "the wrapper they call") in err
    # main's DCP wrapper takes no out= (the envelope's DCP calls with caller buffers: 2, and 16 pairwise cases).
    assert cli_main(["sweep", "--list", "--grid", "callers", "--device", "cpu", "--b", "main"]) == 0
    out, err = capsys.readouterr()
    assert len([line for line in out.splitlines() if "rejection=" not in line]) == 699
    assert "18 selected configurations not listed" in err


def test_configurations_are_distinct_and_ids_match(g):
    pts = g.points()
    assert len({p.config for p in pts}) == 1728
    assert all(p.case_id == p.config.case_id for p in pts)


def test_every_spec_path_is_covered(g):
    pts = g.points()
    seen = collections.Counter()
    for p in pts:
        c = p.config
        if c.mode == "convert":
            seen[("convert", c.counts, c.has_prefill)] += 1
        elif c.dcp_size == 1:
            seen[("dcp1", c.counts, c.compact)] += 1
        else:
            seen[("dcp", c.compact, c.counts)] += 1
    for counts in (False, True):
        for prefill in (False, True):
            assert seen[("convert", counts, prefill)]
        for compact in (False, True):
            assert seen[("dcp1", counts, compact)]
            assert seen[("dcp", compact, counts)]
    # DCP sizes 2 and 4, interleave 1 and 64, every rank, with every K, on each DCP path.
    dcp = {(p.label("path"), p.config.dcp_size, p.config.interleave, p.config.dcp_rank, p.config.topk) for p in pts if p.config.is_dcp}
    for path in ("dcp-compact", "dcp-compact-counts", "dcp-inplace", "dcp-inplace-counts"):
        for size in (2, 4):
            for inter in (1, 64):
                for rank in range(size):
                    for k in (128, 384, 512, 2048):
                        assert (path, size, inter, rank, k) in dcp
    assert {p.config.tokens for p in pts} >= {1, 1024}
    assert {p.config.invalid_ratio for p in pts} >= {0.0, 1.0}
    assert {p.config.out_of_range > 0 for p in pts} == {False, True}
    assert {p.config.topk_is_pow2 for p in pts} == {False, True}
    for field_name in ("row_layout", "table", "negatives"):
        assert len({getattr(p.config, field_name) for p in pts}) > 1


def test_filters_select_by_dimension_and_field(g):
    f = gridmod.parse_filters(g, ["path=dcp-inplace,dcp-compact", "k=2048", "tokens=1", "dcp_size=4"])
    pts = g.select(f)
    assert pts and all(p.label("path") in ("dcp-inplace", "dcp-compact") for p in pts)
    assert all(p.config.topk == 2048 and p.config.tokens == 1 and p.config.dcp_size == 4 for p in pts)
    assert len(g.select(gridmod.parse_filters(g, ["invalid=0.30"]))) == 1728 // 4
    assert len(g.select(max_tokens=3)) == 1728 // 3


@pytest.mark.parametrize("spec", ["nope=1", "k=999", "k", "path="])
def test_bad_filters_are_one_line_errors(g, spec):
    with pytest.raises(ConfigError) as exc:
        gridmod.parse_filters(g, [spec])
    assert "\n" not in str(exc.value)


def test_bad_filter_on_the_command_line(capsys):
    assert cli_main(["sweep", "--list", "--filter", "k=999"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "k has no value 999" in err


@pytest.mark.parametrize("load, what", [(gridmod.load, "grid file"), (rejection_calls, "rejections file")])
@pytest.mark.parametrize("content, problem", [
    (None, "cannot read {what} {path}: Is a directory"),
    (b"[axis\n", "{what} {path} is not valid TOML: "),
    (b"name = '\xff'\n", "{what} {path} is not valid TOML: byte 8 is not UTF-8"),
])
def test_an_unreadable_or_malformed_toml_file_is_one_line(tmp_path, load, what, content, problem):
    path = tmp_path / "bad.toml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(ConfigError) as exc:
        load(str(path))
    assert str(exc.value).startswith(problem.format(what=what, path=path)) and "\n" not in str(exc.value)
