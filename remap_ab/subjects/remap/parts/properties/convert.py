"""A ≡ B ≡ oracle through the plain convert wrapper (SPEC §3-§6), and through the DCP
wrapper at dcp_size 1, which must delegate to it."""

from hypothesis import given

from remap_ab.properties import profiles
from remap_ab.strategies import case_configs, regressions
from remap_ab.subjects.remap.parts.properties.support import assert_verdict_passes, fail, run


@given(config=case_configs(modes=("convert",)))
@regressions("convert_prefill_huge", "single_token", transform=lambda c: c.replace(mode="convert"))
@profiles.settings_for(1.0)
def test_convert_wrapper_matches_oracle(impl_names, config):
    # Every lane in place, bit for bit; counts exact; prefill rows included.
    result = run(config, impl_names)
    assert_verdict_passes(result)


@given(config=case_configs(modes=("dcp",), dcp_sizes=(1,)))
@profiles.settings_for(0.5)
def test_dcp_size_one_delegates_to_convert(impl_names, config):
    # SPEC §6: dcp_size 1 is the plain convert; interleave and compaction are ignored,
    # so the output is in place even though compact_valid_to_front may be set.
    result = run(config, impl_names)
    assert_verdict_passes(result)
    for side in (result.a, result.b):
        if config.compact and not bool((side.out == result.reference.lanes).all()):
            fail(result, f"{side.name}: dcp_size 1 with compaction requested did not return the in-place lanes")
