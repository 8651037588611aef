"""Compile ahead (precompile.py): worker processes with no GPU compile the variants of
coming cases for a GPU target into Triton's on-disk cache, so that the device process
only loads them. Here the target is an H200's (sm_90), cross-compiled on whatever
machine runs the tests: the cubins are real, the GPU never needed."""

from __future__ import annotations

import itertools

import pytest

from remap_ab.config import CaseConfig
from remap_ab.processes import precompile
from remap_ab.soak import run as soak

H200 = precompile.Target("cuda", 90, 32)


def _finish(ahead, configs, timeout=240.0):
    import time

    end = time.monotonic() + timeout
    while not all(ahead.ready(c) for c in configs):
        assert time.monotonic() < end, ahead.summary()
        ahead.wait_any(timeout=1.0)


def test_workers_cross_compile_each_variant_once_into_the_on_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    one = CaseConfig(mode="convert", tokens=3, topk=384, counts=True)
    same_variant = one.replace(tokens=7, seed=5, invalid_ratio=0.9)  # other data, same kernels
    other = CaseConfig(mode="dcp", tokens=2, topk=256, dcp_size=2, dcp_rank=1)
    assert precompile.variant_key(one) == precompile.variant_key(same_variant) != precompile.variant_key(other)

    ahead = precompile.Ahead("old", "new", H200, workers=2)
    try:
        for c in (one, same_variant, other):
            ahead.submit(c)
        assert len(ahead.pending) == 2  # the second case of a variant compiles nothing more
        _finish(ahead, [one, same_variant, other])
    finally:
        ahead.close()
    # Each variant: one kernel of old and one of new, compiled for sm_90.
    assert (ahead.compiled, ahead.cached, ahead.failed) == (4, 0, 0), ahead.summary()
    cubins = list((tmp_path / "cache").rglob("*.cubin"))
    assert len(cubins) == 4 and all(c.stat().st_size > 0 for c in cubins)

    again = precompile.Ahead("old", "new", H200, workers=1)  # a later soak on this host
    try:
        for c in (one, other):
            again.submit(c)
        _finish(again, [one, other])
    finally:
        again.close()
    assert (again.compiled, again.cached) == (0, 4), again.summary()
    assert "0 kernels compiled, 4 found in Triton's cache" in again.summary()


def test_one_token_row_or_one_request_is_a_variant_of_its_own(tmp_path, monkeypatch):
    """A strided view with a dimension of size 1 is contiguous to ``.contiguous()``, so
    its row stride and offset reach the kernel: other kernels than the same case with
    more rows compiles. Their keys must differ, or a soak that compiled a key's first
    draw ahead compiles the other in the device process (seen on an H200: 68 to 108
    kernels in a 45 s soak)."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    rows = CaseConfig(mode="dcp", tokens=5, num_reqs=3, topk=256, dcp_size=2, dcp_rank=1, layout="mixed")
    variants = [rows, rows.replace(tokens=1), rows.replace(num_reqs=1)]
    assert len({precompile.variant_key(c) for c in variants}) == 3
    compiled = []
    ahead = precompile.Ahead("old", "new", H200, workers=1)
    try:
        for c in variants:  # one at a time: what each adds to the cache
            before = ahead.compiled
            ahead.submit(c)
            _finish(ahead, [c])
            compiled.append(ahead.compiled - before)
    finally:
        ahead.close()
    assert compiled[0] == 2 and compiled[1] > 0 and compiled[2] > 0, (compiled, ahead.summary())


def test_a_variant_that_cannot_compile_ahead_is_left_to_the_device(tmp_path, monkeypatch):
    """An implementation whose wrapper needs a GPU to run at all: the compile worker
    says so, the variant counts as ready (the device process compiles it at launch)."""
    (tmp_path / "needs_cuda.py").write_text(
        "import kernels_new as _k\n"
        "def triton_convert_req_index_to_global_index(*a, **k):\n"
        "    raise RuntimeError('this wrapper insists on cuda')\n"
        "triton_filter_and_convert_dcp_index = _k.triton_filter_and_convert_dcp_index\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))  # the workers get this process's sys.path
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    config = CaseConfig(mode="convert", tokens=1, topk=128, counts=False)
    ahead = precompile.Ahead("old", "needs_cuda", H200, workers=1)
    try:
        ahead.submit(config)
        _finish(ahead, [config])
    finally:
        ahead.close()
    assert ahead.failed == 1 and "this wrapper insists on cuda" in ahead.summary()


class _FakeAhead:
    """Ready after ``delay`` polls per variant; records what was submitted."""

    def __init__(self, delay: int = 2):
        self.delay = delay
        self.polls: dict[tuple, int] = {}
        self.submitted: list[tuple] = []

    def submit(self, config):
        key = precompile.variant_key(config)
        if key not in self.polls:
            self.polls[key] = 0
            self.submitted.append(key)

        self.any_ready = False

    def ready(self, config):
        key = precompile.variant_key(config)
        self.polls[key] += 1
        self.any_ready = self.any_ready or self.polls[key] > self.delay
        return self.polls[key] > self.delay

    def started(self):
        return self.any_ready

    def wait_any(self, timeout):
        pass


class _RecordingJudge:
    def __init__(self, ahead):
        self.ahead = ahead
        self.batches, self.done = [], 0  # (contended, draws, a variant was ready by then)

    def batch(self, draws, contended=False):
        self.batches.append((contended, list(draws), self.ahead.any_ready))
        self.done += len(draws)


def _scheduled(ahead, cases: int):
    """``run_ahead`` over ``cases`` draws with ``ahead``: (cases judged, the judge, the first draws)."""
    plan = soak.WorkerPlan(worker=0, device="cuda", a="old", b="new", seed=3, max_tokens=64, max_topk=1024,
                           folder="", deadline=float("inf"), max_cases=cases, contend_every=4, batch=8,
                           fresh_every=4, compile_workers=1)
    stream = soak.draws(plan.seed, 0, plan.max_tokens, plan.max_topk, plan.contend_every, 0, plan.fresh_every)
    judge = _RecordingJudge(ahead)
    n = soak.run_ahead(plan, stream, judge, lambda: False, soak.WorkerTimes(), ahead)
    first = list(itertools.islice(soak.draws(plan.seed, 0, plan.max_tokens, plan.max_topk, plan.contend_every, 0,
                                             plan.fresh_every), cases))
    return n, judge, first


def test_the_schedule_judges_exactly_the_first_draws_with_same_variants_together():
    ahead = _FakeAhead()
    n, judge, first = _scheduled(ahead, 200)
    judged = [d for _, b, _ in judge.batches for d in b]
    assert n == 200 and sorted(d.config.case_id for d in judged) == sorted(d.config.case_id for d in first)
    assert all(d.contended == contended for contended, b, _ in judge.batches for d in b)
    assert sum(d.contended for d in judged) == 50
    assert all(len(b) <= 8 for _, b, _ in judge.batches)
    # One draw in four is a fresh variant: about 50 compiles for 200 cases, not 200.
    assert len(ahead.submitted) == len({precompile.variant_key(d.config) for d in first}) <= 60
    # A batch holds its variants together: sorted by variant, so runs of one key.
    for _, b, _ in judge.batches:
        keys = [precompile.variant_key(d.config) for d in b]
        assert keys == sorted(keys)


class _StartingAhead(_FakeAhead):
    """Compile workers that take two rounds of the schedule to start: nothing is ready before."""

    def __init__(self):
        super().__init__(delay=0)
        self.rounds = 0

    def started(self):
        self.rounds += 1
        self.any_ready = self.rounds > 2
        return self.any_ready

    def ready(self, config):
        return self.any_ready and super().ready(config)

    def wait_any(self, timeout):  # waiting lets the rounds pass too
        self.started()


def test_while_the_compile_workers_start_one_variant_at_a_time_is_judged_not_waited_for():
    """Each round before the workers are up judges the draws of one variant, the most
    drawn one still waiting (compiled here if need be), not a batch of many variants."""
    n, judge, first = _scheduled(_StartingAhead(), 100)
    assert n == 100
    rounds: dict = {}  # variant -> its draws judged before any variant was ready (contended ones apart)
    for _, b, was_ready in judge.batches:
        if not was_ready:
            assert len({precompile.variant_key(d.config) for d in b}) == 1
            rounds.setdefault(precompile.variant_key(b[0].config), []).extend(b)
    assert len(rounds) == 2  # two rounds, one variant each
    judged: set = set()
    for key, drawn in rounds.items():
        assert len(drawn) <= 8
        waiting = [precompile.variant_key(d.config) for d in first if d.config.case_id not in judged]
        assert waiting.count(key) == max(waiting.count(k) for k in waiting)
        judged |= {d.config.case_id for d in drawn}


@pytest.mark.parametrize("fresh_every", [1, 4])
def test_fresh_every_reuses_recent_variants_with_fresh_data(fresh_every):
    drawn = list(itertools.islice(soak.draws(11, 0, 512, fresh_every=fresh_every), 400))
    keys = [precompile.variant_key(d.config) for d in drawn]
    assert len({d.config.case_id for d in drawn}) == 400  # every case is new
    new = sum(1 for i, k in enumerate(keys) if k not in keys[:i])
    if fresh_every == 1:
        assert new > 350  # (a fresh draw may repeat a variant by chance)
    else:
        assert new <= 100 and all(k in keys[: i + 1] for i, k in enumerate(keys))
        # the re-drawn data differs from the variant's first case
        assert len({d.config.tokens for d in drawn}) > 50
