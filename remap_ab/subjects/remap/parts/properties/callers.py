"""A ≡ B ≡ oracle on the calls the attention backends make (issue 24), and the
backend's view of both outputs the same: every backend in every call pattern it
makes, at its block sizes and widths, with the inputs built as the backends build
them (``strategies.caller_configs``). One property per pattern, so that the ci
profile's derandomized draws visit every (backend, pattern) class
(tests/test_coverage.py)."""

from hypothesis import given

from remap_ab.properties import profiles
from remap_ab.strategies import CALLS, caller_configs
from remap_ab.subjects.remap.parts.properties.support import assert_verdict_passes, fail, run

# The backends vLLM main added (issue 32): pattern A's calls split in two properties, so
# that each property's share of the ci profile's draws still visits each of its backends.
_MAIN_BACKENDS = ("flashinfer-sm90", "cutlass-fa3", "hisparse", "index-group")


def _calls(pattern: str, main: bool | None = None) -> list:
    return [call for call in CALLS if call[1] == pattern and (main is None or (call[0] in _MAIN_BACKENDS) == main)]


def _check(impl_names, config) -> None:
    # The verdict includes the backend_view check; a caller hazard is info, not a failure.
    result = run(config, impl_names)
    assert_verdict_passes(result)
    if result.verdict.backend_view != "same":
        fail(result, f"the backend view of {config.caller} was not checked ({result.verdict.backend_view!r})")


@given(config=caller_configs(calls=_calls("A", main=False)))
@profiles.settings_for(0.5)
def test_pattern_a_convert_with_counts(impl_names, config):
    _check(impl_names, config)


@given(config=caller_configs(calls=_calls("A", main=True)))
@profiles.settings_for(0.5)
def test_pattern_a_convert_with_counts_main_callers(impl_names, config):
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


@given(config=caller_configs(calls=_calls("E")))
@profiles.settings_for(0.25)
def test_pattern_e_dcp_filter_in_place(impl_names, config):
    _check(impl_names, config)
