"""Batched input generation, the batched reference and run_batch: the same bytes and
verdicts as one case at a time, whatever the batch mixes.

``data/input_hashes.jsonl`` holds ``inputs_sha256`` (the results table's column) of 256
configurations as the one-case generator made them before generation was batched:
grid points and a wider sample (every row layout, table kind, negatives, prefill, DCP
sizes, interleaves and ranks, odd block sizes and widths, seeds past 2**32). Input
hashes are compared across machines and runs, so they must never change silently."""

import json
import random
from pathlib import Path

import pytest
import torch

from remap_ab import runtime
from remap_ab.subjects.remap.case.config import CaseConfig, ConfigError
from remap_ab.subjects.remap.case.inputs import generate_inputs, generate_inputs_batch
from remap_ab.subjects.remap.judge.batch import hash_inputs
from remap_ab.subjects.remap.judge.runner import reference, reference_batch

RECORDED = [json.loads(line) for line in (Path(__file__).parent / "data" / "input_hashes.jsonl").read_text().splitlines()]


def _recorded_configs():
    configs = [CaseConfig.from_dict(r["config"]) for r in RECORDED]
    assert [c.case_id for c in configs] == [r["case_id"] for r in RECORDED], "configuration fields changed"
    return configs


def _mixed_batches(items, seed):
    """``items`` shuffled and cut into batches of mixed sizes (1 to 64)."""
    rng = random.Random(seed)
    items = list(items)
    rng.shuffle(items)
    while items:
        n = rng.choice([1, 2, 5, 17, 64])
        yield items[:n]
        items = items[n:]


def test_recorded_input_hashes_are_unchanged_batched_and_one_by_one():
    configs = _recorded_configs()
    expected = {r["case_id"]: r["inputs_sha256"] for r in RECORDED}
    for batch in _mixed_batches(configs, seed=1):
        for c, x in zip(batch, generate_inputs_batch(batch)):
            assert hash_inputs(x)[1] == expected[c.case_id], f"batched inputs of {c.case_id} changed"
    for c in configs[::4]:
        assert hash_inputs(generate_inputs(c))[1] == expected[c.case_id], f"inputs of {c.case_id} changed"


@pytest.mark.gpu
def test_recorded_input_hashes_are_unchanged_in_batches_drawn_on_the_gpu():
    """Batches of many cases drawn on the GPU (draw_kernel.py, per-element keys) give
    the bytes recorded on the CPU."""
    expected = {r["case_id"]: r["inputs_sha256"] for r in RECORDED}
    for batch in _mixed_batches(_recorded_configs(), seed=2):
        for c, x in zip(batch, generate_inputs_batch(batch, "cuda")):
            assert hash_inputs(x)[1] == expected[c.case_id], f"inputs of {c.case_id} drawn on the GPU changed"


@pytest.mark.parametrize("n", [1, 7, 1024, 3000])
def test_draw_kernel_gives_the_torch_draws_values(n):
    """The GPU's one-pass hash (draw_kernel.py) against ``inputs._draw``'s torch ops, on
    every key shape the generator passes it; here through the interpreter on the CPU,
    on the device itself on a GPU (where ``_draw`` takes it)."""
    from remap_ab.subjects.remap.case import draw_kernel
    from remap_ab.subjects.remap.case.inputs import _draw

    device = runtime.current()
    g = torch.Generator().manual_seed(n)
    index = torch.randint(0, 2**40, (n,), generator=g).to(device)
    for shape in ((n,), (1,), (6, n), (4, 1)):
        keys = torch.randint(0, 2**32, shape, generator=g).to(device)
        # The torch form on the CPU (on a GPU, _draw would take the kernel itself).
        want = _draw(keys.cpu(), index.cpu())
        got = draw_kernel.draw(keys, index)
        assert got.dtype == torch.int64 and got.shape == want.shape, shape
        assert torch.equal(got.cpu(), want), (shape, int((got.cpu() != want).sum()))


def test_draws_the_kernel_cannot_take_go_to_the_torch_form():
    """Keys whose last dimension is neither 1 nor the index's length (the kernel would
    read past them) and indices of another rank are not given to draw_kernel.py: the
    torch form gets them, and says why it cannot broadcast them."""
    from remap_ab.subjects.remap.case.inputs import _draw, drawn_in_one_pass

    index = torch.arange(5)
    for shape in ((5,), (1,), (3, 5), (3, 1)):
        assert drawn_in_one_pass(torch.zeros(shape, dtype=torch.int64), index), shape
    for shape in ((4,), (3, 4), (3, 6), (2, 3, 5)):
        assert not drawn_in_one_pass(torch.zeros(shape, dtype=torch.int64), index), shape
    assert not drawn_in_one_pass(torch.zeros(5, dtype=torch.int64), index.view(5, 1))
    with pytest.raises(RuntimeError, match="size"):
        _draw(torch.zeros((3, 4), dtype=torch.int64), index)


def _sample(n, seed):
    """Varied configurations, small enough for the CPU."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        bn = rng.choice([16, 64, 128])
        mode = rng.choice(["convert", "dcp"])
        size = rng.choice([1, 2, 4])
        ratio = rng.choice([0.0, 0.3, 0.9, 1.0])
        try:
            out.append(CaseConfig(
                mode=mode, tokens=rng.choice([1, 3, 16]), topk=bn * rng.choice([1, 3, 4]), block_n=bn,
                block_size=rng.choice([16, 64]), blocks_per_req=rng.choice([1, 7, 64]), num_reqs=rng.choice([1, 3]),
                invalid_ratio=ratio, out_of_range=min(0.1, 1.0 - ratio), negatives=rng.choice(["minus_one", "any"]),
                table=rng.choice(["random", "padded", "huge"]),
                row_layout=rng.choice(["uniform", "mixed", "one_tile", "tail_padded", "owned"]),
                dcp_size=size, dcp_rank=rng.randrange(size), interleave=rng.choice([1, 16]),
                compact=rng.choice([True, False]), counts=rng.choice([True, False]),
                prefill_fraction=rng.choice([0.0, 0.5]) if mode == "convert" else 0.0,
                seed=rng.choice([len(out), 2**33 + len(out)]),
            ))
        except ConfigError:
            continue
    return out


def test_batch_gives_each_case_its_own_bytes_as_contiguous_int32():
    configs = _sample(120, seed=3)
    for batch in _mixed_batches(configs, seed=4):
        for c, x in zip(batch, generate_inputs_batch(batch)):
            assert x.sha256() == generate_inputs(c).sha256(), c.case_id
            assert all(t.dtype == torch.int32 and t.is_contiguous() for t in x.tensors().values())
            assert (x.prefill_request_ids is not None) == c.has_prefill
    assert generate_inputs_batch([]) == []


@pytest.mark.parametrize("seed", [5, 6])
def test_reference_batch_equals_reference(seed):
    configs = _sample(120, seed=seed) + _recorded_configs()[seed::8]
    for batch in _mixed_batches(configs, seed=seed):
        inputs = generate_inputs_batch(batch)
        for c, x, got in zip(batch, inputs, reference_batch(batch, inputs)):
            want = reference(c, x)
            for name in ("lanes", "valid", "out", "counts"):
                a, b = getattr(got, name), getattr(want, name)
                assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), (c.case_id, name)
                assert a.is_contiguous()


OFF_BY_ONE = """
\"\"\"The oracle, but lane (0, 0) of every output is one more.\"\"\"
from remap_ab.subjects.remap.judge import oracle
def _bump(result):
    out = result[0] if isinstance(result, tuple) else result
    out[0, 0] += 1
    return result


def triton_convert_req_index_to_global_index(*args, **kwargs):
    return _bump(oracle.triton_convert_req_index_to_global_index(*args, **kwargs))


def triton_filter_and_convert_dcp_index(*args, **kwargs):
    return _bump(oracle.triton_filter_and_convert_dcp_index(*args, **kwargs))
"""


TILES_REVERSED = """
\"\"\"The oracle, but a compacted row holds its tile segments last tile first (what a
tiled kernel's atomic slots may do): a pass, with the order differing.\"\"\"
import torch
from remap_ab.subjects.remap.judge import oracle
from remap_ab.subjects.remap.judge.oracle import triton_convert_req_index_to_global_index  # noqa: F401


def triton_filter_and_convert_dcp_index(req_id, block_table, token_indices, dcp_size, dcp_rank,
                                        cp_kv_cache_interleave_size=1, BLOCK_SIZE=64, NUM_TOPK_TOKENS=2048,
                                        BLOCK_N=128, return_valid_counts=False, compact_valid_to_front=True):
    result = oracle.triton_filter_and_convert_dcp_index(
        req_id, block_table, token_indices, dcp_size, dcp_rank, cp_kv_cache_interleave_size,
        BLOCK_SIZE=BLOCK_SIZE, NUM_TOPK_TOKENS=NUM_TOPK_TOKENS, BLOCK_N=BLOCK_N, return_valid_counts=True,
        compact_valid_to_front=compact_valid_to_front)
    out, counts = result
    if dcp_size > 1 and compact_valid_to_front:
        lanes, valid = oracle.remap(req_id, block_table, token_indices, block_size=BLOCK_SIZE, dcp_size=dcp_size,
                                    dcp_rank=dcp_rank, interleave=cp_kv_cache_interleave_size)
        for r in range(out.shape[0]):
            tiles = [lanes[r, i : i + BLOCK_N][valid[r, i : i + BLOCK_N]] for i in range(0, NUM_TOPK_TOKENS, BLOCK_N)]
            row = torch.cat(tiles[::-1])
            out[r] = -1
            out[r, : row.numel()] = row
    return (out, counts) if return_valid_counts else out
"""

MISBEHAVES_BY_CASE = """
\"\"\"The oracle, misbehaving by case (so one batch mixes every kind of proof): it
passes, raises, returns int64, or returns counts one too high.\"\"\"
from remap_ab.subjects.remap.judge import oracle
def _spoil(result, token_indices):
    kind = int(token_indices.abs().sum()) % 4
    if kind == 1:
        raise RuntimeError("spoiled")
    out, counts = result if isinstance(result, tuple) else (result, None)
    if kind == 2:
        out = out.long()
    if kind == 3 and counts is not None:
        counts = counts + 1
    return (out, counts) if isinstance(result, tuple) else out


def triton_convert_req_index_to_global_index(req_id, block_table, token_indices, *args, **kwargs):
    return _spoil(oracle.triton_convert_req_index_to_global_index(req_id, block_table, token_indices, *args, **kwargs), token_indices)


def triton_filter_and_convert_dcp_index(req_id, block_table, token_indices, *args, **kwargs):
    return _spoil(oracle.triton_filter_and_convert_dcp_index(req_id, block_table, token_indices, *args, **kwargs), token_indices)
"""

BROKEN_SOURCES = {"offbyone": OFF_BY_ONE, "tilesreversed": TILES_REVERSED, "misbehaves": MISBEHAVES_BY_CASE}


def want_counts_max(c):
    counts = reference(c, generate_inputs(c)).counts
    return counts.max() if counts.numel() else 0


@pytest.mark.skipif(runtime.default_device() != "cpu", reason="compares against CPU runs in this process")
@pytest.mark.parametrize("b", ["oracle", "offbyone", "tilesreversed", "misbehaves"])
def test_run_batch_verdicts_equal_run_case(b, broken_impl):
    from remap_ab.subjects.remap.judge.batch import run_batch
    from remap_ab.subjects.remap.judge.runner import run_case

    if b in BROKEN_SOURCES:
        broken_impl(BROKEN_SOURCES[b], name=b)
    configs = _sample(12, seed=9) + [
        CaseConfig(tokens=3, topk=384, row_layout=layout, invalid_ratio=0.3, seed=i)
        for i, layout in enumerate(["uniform", "one_tile", "tail_padded", "owned"])
    ]
    outcomes = run_batch(configs, "oracle", b, "cpu")
    for c, o in zip(configs, outcomes):
        want = run_case(c, "oracle", b, device="cpu").verdict
        got = o.verdict
        assert (got.status, got.failures, got.info) == (want.status, want.failures, want.info), c.case_id
        assert o.inputs_sha256 == hash_inputs(generate_inputs(c))[1]
        # A case that did not pass carries what its report needs; a passing one nothing.
        assert (o.result is not None) == (not want.passed)
        assert o.max_row_valid == int(want_counts_max(c))
    if b == "tilesreversed":
        assert sum(o.verdict.order_differs for o in outcomes) >= 3
    if b == "misbehaves":  # the batch really mixed passes, errors and failures
        assert {o.verdict.status.value for o in outcomes} >= {"pass", "error", "fail"}


def test_a_batch_is_judged_in_parts_of_at_most_the_lanes_held_together():
    from remap_ab.subjects.remap.judge.batch import MOST_LANES_TOGETHER, together

    prefill = [CaseConfig(tokens=16384, topk=2048, seed=s) for s in range(9)]
    assert [len(p) for p in together(prefill)] == [4, 4, 1]
    decode = [CaseConfig(tokens=1024, topk=2048, seed=s) for s in range(64)]
    assert together(decode) == [decode]  # the PR grid's largest batch stays whole
    alone = [CaseConfig(tokens=MOST_LANES_TOGETHER // 4096 * 2, topk=4096, block_n=128)]
    assert together(alone) == [alone] and together([]) == []


@pytest.mark.skipif(runtime.default_device() != "cpu", reason="compares against CPU runs in this process")
def test_parts_of_a_batch_give_the_verdicts_of_the_whole(monkeypatch, broken_impl):
    from remap_ab.subjects.remap.judge import batch

    broken_impl(OFF_BY_ONE, name="offbyone")
    configs = _sample(6, seed=4)
    whole = batch.run_batch(configs, "oracle", "offbyone", "cpu")
    generated: list[int] = []
    real = batch.generate_inputs_batch
    monkeypatch.setattr(batch, "generate_inputs_batch", lambda cs, **kw: generated.append(len(cs)) or real(cs, **kw))
    monkeypatch.setattr(batch, "MOST_LANES_TOGETHER", max(c.tokens * c.topk for c in configs))
    parts = batch.run_batch(configs, "oracle", "offbyone", "cpu")
    assert len(generated) > 1 and sum(generated) == len(configs)
    assert [(o.config.case_id, o.verdict.status, o.verdict.failures) for o in parts] == \
           [(o.config.case_id, o.verdict.status, o.verdict.failures) for o in whole]
    assert any(not o.verdict.passed for o in whole)


@pytest.mark.skipif(runtime.default_device() != "cpu", reason="compares against CPU runs in this process")
def test_the_oracle_api_is_checked_once_per_wrapper_path_per_process(monkeypatch):
    from remap_ab.subjects.remap.judge import batch, oracle
    real = oracle.triton_convert_req_index_to_global_index

    def off_by_one(*args, **kwargs):
        result = real(*args, **kwargs)
        return (result[0] + 1, *result[1:]) if isinstance(result, tuple) else result + 1

    monkeypatch.setattr(oracle, "triton_convert_req_index_to_global_index", off_by_one)
    batch.forget_checked_paths()
    first = [CaseConfig(mode="convert", counts=False, tokens=1, topk=128, seed=s) for s in (1, 2)]
    # The first case of the path is checked (a broken oracle API is an internal error)...
    v1, v2 = (o.verdict for o in batch.run_batch(first, "old", "new", "cpu"))
    assert v1.status == "error" and "internal:" in v1.first.message
    assert v2.status == "pass"
    # ... and not again in this process, while another path still is.
    later = [
        CaseConfig(mode="convert", counts=False, tokens=1, topk=128, seed=3),
        CaseConfig(mode="convert", counts=True, tokens=1, topk=128),
    ]
    v3, v4 = (o.verdict for o in batch.run_batch(later, "old", "new", "cpu"))
    assert v3.status == "pass" and v4.status == "error"
    batch.forget_checked_paths()


def test_hashing_a_batch_at_once_gives_each_case_its_own_digests():
    from concurrent.futures import ThreadPoolExecutor

    from remap_ab.subjects.remap.case import inputs as inputs_module
    from remap_ab.subjects.remap.case.inputs import _digests, _hashing, flattened, generate_inputs_batch, hashing_started
    from remap_ab.subjects.remap.case.layouts import LAYOUT_NAMES

    configs = [c.replace(layout=LAYOUT_NAMES[i % len(LAYOUT_NAMES)]) for i, c in enumerate(_sample(24, seed=4))]
    inputs = generate_inputs_batch(configs, device=runtime.default_device())
    transposed = generate_inputs(CaseConfig(tokens=4))
    transposed.token_indices = transposed.token_indices.t()  # not a layout's view either: gathered all the same
    inputs.append(transposed)
    want = [hash_inputs(x) for x in inputs]
    assert hashing_started(inputs)() == want
    with ThreadPoolExecutor(3) as threads:
        assert hashing_started(inputs, threads)() == want
        # The GPU's way on any device: every input gathered into one flat buffer, none across
        # a chunk's end, the chunks hashed as their host copies; the large inputs by the threads.
        assert _digests(inputs, threads) == want
        chunk = max(-(-t.numel() * 4 // 16) * 16 for x in inputs for t in x.tensors().values())
        flat, place = flattened(inputs, chunk)
        assert flat.numel() > chunk  # more than one chunk
        pieces = [flat[lo : lo + chunk].cpu().numpy().data for lo in range(0, flat.numel(), chunk)]
        with pytest.MonkeyPatch.context() as m:
            m.setattr(inputs_module, "BACKGROUND_BYTES", 64)
            assert _hashing(inputs, pieces, chunk, place, threads, lambda: None)() == want
    assert len({combined for _, combined in want}) == len(want)
