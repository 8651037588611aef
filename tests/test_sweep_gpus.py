"""Issue 7: which GPU each sweep worker / xdist worker gets (pure logic, runs on CPU)."""

import pytest

from remap_ab.host import gpus


def test_visible_gpus_without_outer_variable():
    assert gpus.visible_gpus({}, 0) == []
    assert gpus.visible_gpus({}, 1) == ["0"]
    assert gpus.visible_gpus({}, 4) == ["0", "1", "2", "3"]


def test_visible_gpus_honours_outer_variable():
    assert gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "3,5"}, 2) == ["3", "5"]
    assert gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "GPU-aa,GPU-bb"}, 2) == ["GPU-aa", "GPU-bb"]
    # An empty variable hides every GPU; CUDA stops at the first empty or -1 entry.
    assert gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, 0) == []
    assert gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "2,-1,3"}, 1) == ["2"]


@pytest.mark.parametrize("n_gpus", [1, 2, 3, 8])
@pytest.mark.parametrize("workers", [1, 2, 5, 16])
def test_worker_i_gets_gpu_i_mod_g(n_gpus, workers):
    visible = [str(10 + g) for g in range(n_gpus)]  # as if CUDA_VISIBLE_DEVICES=10,11,...
    envs = gpus.worker_environments(workers, "cuda", visible)
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == [visible[i % n_gpus] for i in range(workers)]
    # Every GPU is used when there are at least as many workers as GPUs.
    assert len({e["CUDA_VISIBLE_DEVICES"] for e in envs}) == min(workers, n_gpus)


def test_cpu_workers_see_no_gpu():
    envs = gpus.worker_environments(3, "cpu", ["0", "1"])
    assert all(e == {"CUDA_VISIBLE_DEVICES": "", "TRITON_INTERPRET": "1"} for e in envs)
    assert gpus.gpu_for_worker(0, []) is None
    with pytest.raises(ValueError):
        gpus.worker_environments(1, "cuda", [])


def test_xdist_worker_pins_itself_from_the_controllers_list():
    env = {"PYTEST_XDIST_WORKER": "gw5", gpus.GPU_LIST_VAR: "4,6"}
    assert gpus.xdist_pin(env) == "6"
    assert env["CUDA_VISIBLE_DEVICES"] == "6"
    assert gpus.xdist_pin(env) is None  # already pinned: idempotent
    assert env["CUDA_VISIBLE_DEVICES"] == "6"


def test_xdist_pin_does_nothing_outside_xdist_or_without_gpus():
    assert gpus.xdist_pin({gpus.GPU_LIST_VAR: "0,1"}) is None
    env = {"PYTEST_XDIST_WORKER": "gw0", gpus.GPU_LIST_VAR: ""}
    assert gpus.xdist_pin(env) is None and "CUDA_VISIBLE_DEVICES" not in env


def test_controller_exports_the_visible_list_once():
    env = {"CUDA_VISIBLE_DEVICES": "2,3"}
    assert gpus.export_gpu_list(env, count=2) == ["2", "3"]
    assert env[gpus.GPU_LIST_VAR] == "2,3"
    env2 = {}
    assert gpus.export_gpu_list(env2, count=0) == [] and env2[gpus.GPU_LIST_VAR] == ""
