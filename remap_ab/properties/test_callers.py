"""A ≡ B ≡ oracle on the calls the attention backends make (issue 24), and the
backend's view of both outputs the same: every backend in every call pattern it
makes, at its block sizes and widths, with the inputs built as the backends build
them (``strategies.caller_configs``). One property per pattern, so that the ci
profile's derandomized draws visit every (backend, pattern) class
(tests/test_coverage.py)."""

from hypothesis import given

from remap_ab.properties import profiles
from remap_ab.properties.support import assert_verdict_passes, fail, run
from remap_ab.strategies import CALLS, caller_configs


def _calls(pattern: str) -> list:
    return [call for call in CALLS if call[1] == pattern]


def _check(impl_names, config) -> None:
    # The verdict includes the backend_view check; a caller hazard is info, not a failure.
    result = run(config, impl_names)
    assert_verdict_passes(result)
    if result.verdict.backend_view != "same":
        fail(result, f"the backend view of {config.caller} was not checked ({result.verdict.backend_view!r})")


@given(config=caller_configs(calls=_calls("A")))
@profiles.settings_for(0.5)
def test_pattern_a_convert_with_counts(impl_names, config):
    _check(impl_names, config)


@given(config=caller_configs(calls=_calls("B")))
@profiles.settings_for(0.25)
def test_pattern_b_with_the_prefill_workspace(impl_names, config):
    _check(impl_names, config)


@given(config=caller_configs(calls=_calls("C")))
@profiles.settings_for(0.5)
def test_pattern_c_convert_without_counts(impl_names, config):
    _check(impl_names, config)


@given(config=caller_configs(calls=_calls("D")))
@profiles.settings_for(0.5)
def test_pattern_d_dcp_filter_with_compaction(impl_names, config):
    _check(impl_names, config)
