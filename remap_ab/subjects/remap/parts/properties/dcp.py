"""A ≡ B ≡ oracle through the DCP wrapper at dcp_size 2 and 4, every rank and
interleave, in place and compacted (SPEC §3.3, §5, §7)."""

from hypothesis import given

from remap_ab.properties import profiles
from remap_ab.strategies import case_configs, regressions
from remap_ab.subjects.remap.parts.properties.support import assert_verdict_passes, run


@given(config=case_configs(modes=("dcp",), dcp_sizes=(4, 2), compact=False))
@profiles.settings_for(1.0)
def test_dcp_in_place_matches_oracle(impl_names, config):
    # Remote lanes are -1 in place; owned lanes are de-interleaved before the table.
    result = run(config, impl_names)
    assert_verdict_passes(result)


@given(config=case_configs(modes=("dcp",), dcp_sizes=(4, 2), compact=True))
@regressions("k384_tiled", "k128_one_tile", "one_valid_tile", "single_token", "full_dcp_row", "tokens_1024_gpu")
@profiles.settings_for(1.0)
def test_dcp_compacted_matches_oracle(impl_names, config):
    # Count, prefix set and -1 tail exact; prefix order exact where the side promises
    # column order, a concatenation of tile segments where it races (the comparator).
    result = run(config, impl_names)
    assert_verdict_passes(result)
