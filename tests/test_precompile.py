"""Compile ahead (precompile.py): worker processes with no GPU compile the variants of
coming cases for a GPU target into Triton's on-disk cache, so that the device process
only loads them. Here the target is an H200's (sm_90), cross-compiled on whatever
machine runs the tests: the cubins are real, the GPU never needed."""

from __future__ import annotations

import itertools

import pytest

from remap_ab import runtime
from remap_ab.host import gpus, tuning
from remap_ab.processes import precompile, start
from remap_ab.soak import run as engine
from remap_ab.subject import JudgeSettings
from remap_ab.subjects.remap.case.config import CaseConfig, variant_key
from remap_ab.subjects.remap.parts import soak

H200 = precompile.Target("cuda", 90, 32)


@pytest.fixture(autouse=True)
def _workers_from_the_fork_server(monkeypatch):
    """Workers start as in remap-ab's own processes (the command line): forked from a
    server that imported torch once, not each importing it (seconds of a core each).
    How workers start is test_start.py's; here, what they compile."""
    monkeypatch.setattr(tuning, "_owned", True)


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
    assert variant_key(one) == variant_key(same_variant) != variant_key(other)

    # One worker: several at once is test_every_variant_a_sweep_needs_is_compiled_ahead_on_several_worker_processes.
    ahead = precompile.Ahead("old", "new", H200, workers=1)
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
    assert len({variant_key(c) for c in variants}) == 3
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
        key = variant_key(config)
        if key not in self.polls:
            self.polls[key] = 0
            self.submitted.append(key)

        self.any_ready = False

    def ready(self, config):
        key = variant_key(config)
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
    plan = engine.WorkerPlan(worker=0, settings=JudgeSettings("old", "new", "cuda", ""), seed=3, deadline=float("inf"),
                             max_cases=cases, batch=8, compile_workers=1)
    max_tokens, max_topk, contend_every, fresh_every = 64, 1024, 4, 4  # the remap's draws
    stream = soak.draws(plan.seed, 0, max_tokens, max_topk, contend_every, 0, fresh_every)
    judge = _RecordingJudge(ahead)
    n = engine.run_ahead(plan, stream, judge, lambda: False, engine.WorkerTimes(), ahead)
    first = list(itertools.islice(soak.draws(plan.seed, 0, max_tokens, max_topk, contend_every, 0,
                                             fresh_every), cases))
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
    assert len(ahead.submitted) == len({variant_key(d.config) for d in first}) <= 60
    # A batch holds its variants together: sorted by variant, so runs of one key.
    for _, b, _ in judge.batches:
        keys = [variant_key(d.config) for d in b]
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
            assert len({variant_key(d.config) for d in b}) == 1
            rounds.setdefault(variant_key(b[0].config), []).extend(b)
    assert len(rounds) == 2  # two rounds, one variant each
    judged: set = set()
    for key, drawn in rounds.items():
        assert len(drawn) <= 8
        waiting = [variant_key(d.config) for d in first if d.config.case_id not in judged]
        assert waiting.count(key) == max(waiting.count(k) for k in waiting)
        judged |= {d.config.case_id for d in drawn}


@pytest.mark.parametrize("fresh_every", [1, 4])
def test_fresh_every_reuses_recent_variants_with_fresh_data(fresh_every):
    drawn = list(itertools.islice(soak.draws(11, 0, 512, fresh_every=fresh_every), 400))
    keys = [variant_key(d.config) for d in drawn]
    assert len({d.config.case_id for d in drawn}) == 400  # every case is new
    new = sum(1 for i, k in enumerate(keys) if k not in keys[:i])
    if fresh_every == 1:
        assert new > 350  # (a fresh draw may repeat a variant by chance)
    else:
        assert new <= 100 and all(k in keys[: i + 1] for i, k in enumerate(keys))
        # the re-drawn data differs from the variant's first case
        assert len({d.config.tokens for d in drawn}) > 50


# --------------------------------------------------------------------------- a sweep's compile-ahead


def _sweep_points():
    """Grid points of many variants, small enough to generate at full size here: one per
    wrapper path of the PR's grid (a different memory layout each, one row or several),
    and two of the callers grid passing BLOCK_STRIDE_ROWS (one with caller-owned outputs)."""
    from remap_ab.subjects.remap.grid import grid
    chosen, seen = [], set()
    layouts = ["contiguous", "mixed", "offset", "token_cols", "table_slice", "req_strided", "token_rows"]
    for p in grid.load(None).points():
        labels = dict(p.labels)
        if p.config.tokens > 4 or labels["k"] not in ("128", "384") or labels["path"] in seen:
            continue
        if p.config.layout != layouts[len(seen) % len(layouts)]:
            continue
        seen.add(labels["path"])
        chosen.append(p)
    callers = [p for p in grid.load("callers").points() if p.config.block_stride and p.config.tokens <= 8]
    chosen += [next(p for p in callers if not p.config.out_buffers), next(p for p in callers if p.config.out_buffers)]
    return chosen


def _batch_calls(a: str, b: str, config_dicts: list) -> list[int]:
    """In a process set up as a compile worker (H200's target, launches only compiled):
    the cases' own calls as the batch engine makes them (one batch's inputs, each
    implementation's private copies, the sides that run each case), each case's kernels
    compiled at these launches, i.e. not found in Triton's on-disk cache."""
    from remap_ab.subjects.remap.case.inputs import generate_inputs_batch
    from remap_ab.subjects.remap.judge.call import PrivateInputs
    from remap_ab.subjects.remap.judge.runner import sides

    configs = [CaseConfig.from_dict(d) for d in config_dicts]
    inputs = generate_inputs_batch(configs, device="cpu")
    own = PrivateInputs.each(inputs, 2)
    missed = []
    for i, c in enumerate(configs):
        before = precompile._COUNTS["compiled"]
        for impl, copies in zip(sides(c, a, b), own):
            if impl.name != "oracle":
                impl(c, copies.cases[i])
        missed.append(precompile._COUNTS["compiled"] - before)
    return missed


def test_every_variant_a_sweep_needs_is_compiled_ahead_on_several_worker_processes(tmp_path, monkeypatch):
    """The sweep's compile-ahead (Sweep._schedule) on H200's target: the device judges the
    first variant itself and finds it compiled a kernel (a cold cache), so every other
    variant is submitted at once; afterwards the points' own calls, made at full size
    as the batch engine makes them, find each of those kernels in the Triton cache dir.
    The first variant, the device's own, is the control: its calls compile."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    a, b = "new", "main"
    points = _sweep_points()
    keys = {variant_key(p.config) for p in points}
    assert len(keys) == len(points) >= 9

    workers = min(2, gpus.host_cores())
    ahead = precompile.Ahead(a, b, H200, workers=workers)
    try:
        schedule = precompile.Schedule(points, lambda: ahead)
        own = schedule.next(len(points))
        assert own == points[:1] and not ahead.pending  # the device's own first variant; no compile yet
        schedule.judged([p.case_id for p in own], compiled=2)  # it compiled: the cache is cold
        assert len(ahead.pending) == len(keys) - 1  # every other variant submitted at once, once
        _finish(ahead, [p.config for p in points[1:]], timeout=480.0)
    finally:
        ahead.close()
    assert ahead.failed == 0 and ahead.variants == len(keys) - 1, ahead.line()
    assert ahead.compiled >= len(keys) - 1, ahead.line()  # every variant: A's kernel and/or B's
    if gpus.host_cores() > 1:
        assert len(ahead.pids) > 1, ahead.line()  # more than one process compiled
    assert f"on {len(ahead.pids) + 1} cores" in ahead.line()
    # (Two variants of one kernel may compile at once in two workers: one cubin, two compiles.)
    assert 0 < len(list((tmp_path / "cache").rglob("*.cubin"))) <= ahead.compiled

    # Everything is compiled: the schedule hands every other point out at once, each once.
    handed = schedule.next(len(points))
    assert sorted(p.case_id for p in handed) == sorted(p.case_id for p in points[1:]) and schedule.next(4) is None

    # A process of its own, set up as a compile worker: it holds none of the workers' kernels in memory.
    with start.executor(1, precompile._init_worker, (H200,)) as verifier:
        missed = verifier.submit(_batch_calls, a, b, [p.config.to_dict() for p in points]).result()
    assert missed[1:] == [0] * (len(points) - 1), missed
    assert missed[0] > 0, missed  # the control: the check sees kernels that were not compiled ahead


class _Group:
    def __init__(self, key, n, tokens=1):
        self.items = [_Item(f"{key}-{i}", key, tokens) for i in range(n)]


class _Item:
    def __init__(self, case_id, variant, tokens):
        self.case_id = case_id
        self.config = CaseConfig(mode="convert", tokens=tokens, topk=128 * variant, block_n=128, counts=False,
                                 seed=int(case_id.split("-")[1]))


class _Workers:
    """``Ahead``'s side of the schedule: variants finish when the test says so."""

    def __init__(self):
        self.submitted, self.finished, self.running, self.taken = [], [], set(), []
        self.up = False

    def submit(self, config):
        self.submitted.append(variant_key(config))

    def collect(self):
        done, self.finished = self.finished, []
        return done

    def started(self):
        return self.up

    def take(self, config):
        key = variant_key(config)
        if key in self.running:
            return False
        self.taken.append(key)
        return True


def _variant(item):
    return item.config.topk // 128


def test_the_sweeps_schedule_judges_compiled_variants_first_and_compiles_itself_only_what_no_worker_holds():
    from remap_ab.subjects.remap.judge import rejections
    items = [x for v in (1, 2, 3, 4, 5, 6) for x in _Group(v, 3 if v != 6 else 5).items]
    call = rejections.sweep_points(0)[0]
    workers = _Workers()
    schedule = precompile.Schedule(items + [call], lambda: workers)
    handed = []

    # The device compiles the first variant itself, and the rejection call (no kernel)
    # comes along; no worker has started.
    first = schedule.next(4)
    assert [_variant(x) for x in first[:-1]] == [1, 1, 1] and first[-1] is call
    assert schedule.ahead is None
    handed += first
    schedule.judged([x.case_id for x in first], compiled=2)  # it compiled: the cache is cold
    # The workers start with every other variant, once each, in the points' order.
    assert schedule.ahead is workers and workers.submitted == [variant_key(x.config) for x in items[3::3]][:5]
    # Workers up, variants 2 and 3 compiled: those first, across variants up to the batch size.
    workers.up = True
    workers.finished = [variant_key(items[3].config), variant_key(items[6].config)]
    batch = schedule.next(4)
    assert [_variant(x) for x in batch] == [2, 2, 2, 3]
    handed += batch
    schedule.judged([x.case_id for x in batch], compiled=0)  # compiled ahead: says nothing of the cache
    batch = schedule.next(4)
    assert [_variant(x) for x in batch] == [3, 3]  # the rest of variant 3 (nothing else compiled yet)
    handed += batch
    # Nothing compiled, variant 6 (the back) is free: the device takes it, one variant, a batch at most.
    workers.running = {variant_key(items[9].config)}  # variant 4 is in a worker's hands
    batch = schedule.next(4)
    assert [_variant(x) for x in batch] == [6, 6, 6, 6] and workers.taken[-1] == variant_key(items[-1].config)
    handed += batch
    batch = schedule.next(4)  # the last of variant 6, taken already
    assert [_variant(x) for x in batch] == [6]
    handed += batch
    # Variant 5 is free too; variant 4 is a worker's: take 5, then wait.
    batch = schedule.next(4)
    assert [_variant(x) for x in batch] == [5, 5, 5]
    handed += batch
    schedule.judged([x.case_id for x in batch], compiled=2)
    assert schedule.next(4) == []  # only variant 4 is left, in a worker: wait for it
    workers.finished = [variant_key(items[9].config)]
    batch = schedule.next(4)
    assert [_variant(x) for x in batch] == [4, 4, 4]
    handed += batch
    assert schedule.next(4) is None
    assert sorted(x.case_id for x in handed) == sorted(x.case_id for x in items + [call])


def test_on_a_warm_cache_the_device_takes_whole_batches_and_starts_no_worker():
    items = [x for v in range(1, 9) for x in _Group(v, 2).items]
    workers = _Workers()
    schedule = precompile.Schedule(items, lambda: workers)
    first = schedule.next(6)
    assert len(first) == 2  # one variant: nothing known of the cache yet
    schedule.judged([x.case_id for x in first], compiled=0)  # found in Triton's cache: warm
    batch = schedule.next(6)
    assert [_variant(x) for x in batch] == [2, 2, 3, 3, 4, 4]  # a whole batch, in the points' order
    assert schedule.ahead is None  # a warm cache starts no compile worker
    schedule.judged([x.case_id for x in batch], compiled=1)  # a kernel compiled: the workers start
    assert schedule.ahead is workers and len(workers.submitted) == 4  # variants 5 to 8
    assert [_variant(x) for x in schedule.next(6)] == [5, 5]  # one variant at a time again, while they start


def test_compile_workers_default_to_the_host_cores_less_the_device_processes(monkeypatch):
    from remap_ab.errors import UsageError

    monkeypatch.delenv(precompile.WORKERS_VARIABLE, raising=False)
    assert precompile.default_workers(1) == max(1, gpus.host_cores() - 1)
    monkeypatch.setenv(precompile.WORKERS_VARIABLE, "0")
    assert precompile.default_workers(1) == 0
    monkeypatch.setenv(precompile.WORKERS_VARIABLE, "many")
    with pytest.raises(UsageError, match="REMAP_AB_COMPILE_WORKERS='many' is not a count"):
        precompile.default_workers(1)


def test_block_stride_and_caller_owned_outputs_are_variants_of_their_own():
    base = CaseConfig(mode="convert", tokens=3, topk=256, counts=True)
    keys = {variant_key(c) for c in (base, base.replace(block_stride=64), base.replace(block_stride=4096),
                                                base.replace(out_buffers=True))}
    assert len(keys) == 4


@pytest.mark.skipif(runtime.default_device() != "cpu", reason="a CPU sweep here needs the interpreter (a CUDA device is present)")
def test_a_cpu_sweep_starts_no_compile_process(tmp_path, monkeypatch):
    """The interpreter compiles nothing: no compile-ahead pool, no line about one."""
    from remap_ab.sweep.run import Sweep, SweepOptions

    def refused(*args, **kwargs):
        raise AssertionError("a compile-ahead pool was started for the CPU")

    monkeypatch.setattr(precompile, "Ahead", refused)
    sweep = Sweep(SweepOptions(device="cpu", workers=0, max_size=1, filters=["path=convert", "k=128"],
                               root=str(tmp_path), progress=False))
    sweep.prepare()
    summary = sweep.run()
    assert summary["passed"] and summary["cases"] > 0
    assert summary["last_session"]["compile_ahead"] == ""


class _FakeLoads:
    compiled_next = 0

    def __init__(self, active=True):
        self.active, self.compiled = active, 0

    def __enter__(self):
        if self.active:
            self.compiled = _FakeLoads.compiled_next
        return self

    def __exit__(self, *exc):
        return None


class _SlowAhead:
    """Every submitted variant is compiled after one wait."""

    def __init__(self, a, b, target, workers, subject="remap"):
        self.pending, self.submitted, self.waits = {}, [], 0

    def submit(self, config):
        key = variant_key(config)
        if key not in self.pending:
            self.pending[key] = config
            self.submitted.append(key)

    def ready(self, config):
        return self.waits > 0

    def wait_any(self, timeout):
        self.waits += 1

    def close(self):
        pass


@pytest.mark.parametrize("compiled", [0, 3])
def test_the_pytest_grid_compiles_what_comes_next_only_after_a_cold_first_batch(monkeypatch, compiled):
    """pytest's order is fixed: after the first batch (judged by the device), a cold
    cache submits every later case's variant at once, and each later batch waits for
    its own; a warm one starts nothing."""
    items = [x for v in (1, 2, 3) for x in _Group(v, 2).items]
    monkeypatch.setattr(precompile, "Loads", _FakeLoads)
    monkeypatch.setattr(precompile, "Ahead", _SlowAhead)
    monkeypatch.setattr(precompile, "device_target", lambda: H200)
    _FakeLoads.compiled_next = compiled
    judged: list = []
    order = precompile.InOrder("old", "new", "cuda", coming=lambda: [x.config for x in items if x not in judged])
    for first in (items[:2], items[2:4]):
        with order.judging([x.config for x in first]):
            judged += first
    if not compiled:
        assert order.ahead is None
        return
    assert order.ahead is not None and order.ahead.submitted == [variant_key(items[i].config) for i in (2, 4)]
    assert order.ahead.waits == 1  # the second batch waited for its variant


def test_the_pytest_grid_on_the_cpu_or_under_xdist_never_compiles_ahead(monkeypatch):
    monkeypatch.setattr(precompile, "Ahead", lambda *a, **k: pytest.fail("a compile-ahead pool was started"))
    order = precompile.InOrder("old", "new", "cpu", coming=lambda: [])
    with order.judging([]):
        pass
    assert order.ahead is None


def test_compile_workers_that_cannot_start_leave_every_variant_to_the_device():
    """Compiling ahead decides nothing: when its workers cannot start, the device
    compiles every variant at its launch, one at a time, and the run says why."""
    items = [x for v in (1, 2, 3) for x in _Group(v, 2).items]

    def broken():
        raise OSError("no room for another process")

    schedule = precompile.Schedule(items, broken)
    handed = []
    while (batch := schedule.next(4)) is not None:
        assert batch, "nothing may wait for workers that never started"
        handed += batch
        schedule.judged([x.case_id for x in batch], compiled=2)
    assert sorted(x.case_id for x in handed) == sorted(x.case_id for x in items)
    assert schedule.ahead is None and "no room for another process" in schedule.start_error


def test_the_schedule_asks_the_subject_which_items_compile():
    """Which items compile, and which variant, is the subject's ``variant``: under a
    subject whose cases compile nothing ahead (the topology's) every item is handed out
    at once and no worker starts; under the remap's, each variant is a group."""
    items = [x for v in (1, 2, 3) for x in _Group(v, 2).items]

    def never():
        raise AssertionError("no compile worker may start")

    topology = precompile.Schedule(items, never, subject="topology")
    assert not topology.groups and topology.next(10) == items
    remap = precompile.Schedule(items, never)
    assert set(remap.groups) == {variant_key(x.config) for x in items} and len(remap.groups) == 3
