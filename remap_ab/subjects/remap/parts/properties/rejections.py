"""B rejects every call A rejects (SPEC §6's preconditions, ``rejections.toml``), with
A's exception type or a subclass of it; what A accepts is not judged. Each call's base
case is varied (rows, seed), so the rejection cannot hinge on one shape."""

from hypothesis import given
from hypothesis import strategies as st

from remap_ab import command_line
from remap_ab.properties import profiles
from remap_ab.strategies import write_rejection_failure_report
from remap_ab.subjects.remap.judge.rejections import load, run_rejection


@st.composite
def rejection_calls(draw):
    case = draw(st.sampled_from(load()))
    base = case.base.replace(tokens=draw(st.integers(2, 9)), seed=draw(st.integers(0, 2**16)))
    return type(case)(case.id, case.precondition, base, case.args, case.tensors, case.what, case.spec_rejects)


@given(case=rejection_calls())
@profiles.settings_for(0.5)
def test_b_rejects_what_a_rejects(impl_names, case):
    a, b = impl_names
    verdict = run_rejection(case, a, b)
    if not verdict.passed:
        first = verdict.first
        folder = write_rejection_failure_report(case, verdict, a, b)
        raise AssertionError(f"rejection call {case.id} ({case.describe()}) on base case {case.base.case_id}: "
                             f"{first.line() if first else verdict.summary()}\n"
                             "replay (the call on its default base case): "
                             + command_line.line("run", "--rejection", case.id, a=a, b=b)
                             + (f"\nreport: {folder} ({command_line.line('replay', str(folder))} makes this very call)"
                                if folder else ""))
