"""``recording.Judge``, the one judge of the soak and the pytest grid: a batch that
raises is judged case by case; a case that raises alone is ``on_crash``'s row (or
raises); ``raises`` and ``before_split`` stop it; ``on_rows`` sees every judged batch.
The batch engine is replaced by a fake that fails on chosen cases, so each rule is
seen on its own."""

from __future__ import annotations

import pytest

from remap_ab.subject import JudgeSettings
from remap_ab.subjects.remap.report import recording


class Broken(Exception):
    pass


class Fatal(Exception):
    pass


@pytest.fixture
def engine(monkeypatch):
    """The fake batch engine: a batch holding a case named in ``bad`` raises ``error``."""
    calls: list[list] = []
    state = {"bad": set(), "error": Broken}

    def judge_and_record(configs, settings, times=None, context=None):
        calls.append(list(configs))
        if state["bad"] & set(configs):
            raise state["error"]("engine failed")
        return [{"case_id": c, "status": "pass", "context": context} for c in configs]

    monkeypatch.setattr(recording, "judge_and_record", judge_and_record)
    return calls, state


def _judge(**kwargs):
    return recording.Judge(JudgeSettings("old", "new", "cpu", None), **kwargs)


def test_a_batch_that_passes_is_one_call_with_its_seconds_shared(engine):
    calls, _ = engine
    kept = []
    judged = _judge(on_rows=kept.append).judge(["c1", "c2", "c3"], context="ctx")
    assert calls == [["c1", "c2", "c3"]]
    assert [r["case_id"] for r, _ in judged] == ["c1", "c2", "c3"] and all(r["context"] == "ctx" for r, _ in judged)
    assert len({s for _, s in judged}) == 1 and judged[0][1] >= 0
    assert [[r["case_id"] for r in rows] for rows in kept] == [["c1", "c2", "c3"]]


def test_a_batch_that_raises_is_judged_case_by_case_and_the_bad_case_is_a_crash_row(engine):
    calls, state = engine
    state["bad"] = {"c2"}
    judge = _judge(on_crash=lambda config, exc: {"case_id": config, "status": "crash", "line": str(exc)})
    judged = judge.judge(["c1", "c2", "c3"])
    assert calls == [["c1", "c2", "c3"], ["c1"], ["c2"], ["c3"]]
    assert [(r["case_id"], r["status"]) for r, _ in judged] == [("c1", "pass"), ("c2", "crash"), ("c3", "pass")]
    assert judged[1][0]["line"] == "engine failed"
    assert judge.batches == 2  # c1 and c3; the crash is no judged batch


def test_without_on_crash_the_lone_case_raises_after_the_rows_judged_before_it(engine):
    _, state = engine
    state["bad"] = {"c2"}
    kept = []
    with pytest.raises(Broken):
        _judge(on_rows=kept.append).judge(["c1", "c2", "c3"])
    assert [[r["case_id"] for r in rows] for rows in kept] == [["c1"]]


def test_raises_and_before_split_stop_the_split(engine):
    calls, state = engine
    state.update(bad={"c1"}, error=Fatal)
    with pytest.raises(Fatal):
        _judge(raises=(Fatal,), on_crash=lambda c, e: {}).judge(["c1", "c2"])
    assert calls == [["c1", "c2"]]

    calls.clear()
    state["error"] = Broken
    seen = []

    def before_split(exc, configs):
        seen.append((type(exc), list(configs)))
        raise Fatal("context lost")

    with pytest.raises(Fatal, match="context lost"):
        _judge(before_split=before_split, on_crash=lambda c, e: {}).judge(["c1", "c2"])
    assert calls == [["c1", "c2"]] and seen == [(Broken, ["c1", "c2"])]


def test_nothing_to_judge_is_no_call(engine):
    calls, _ = engine
    assert _judge().judge([]) == [] and calls == []
