"""Slot and actor planning: timed evaluations never share a GPU, correctness work stays off the
timing GPUs, and impossible layouts fail with a message naming the config key."""

import pytest

from kernelarc.config import ExecutorConfig
from kernelarc.errors import ConfigError
from kernelarc.executor.slot_plan import plan_actors, plan_slots, visible_gpus


@pytest.mark.parametrize(
    ("gpus", "correctness_gpus", "slots", "max_timed", "timed", "correctness"),
    [
        pytest.param(None, [], 1, None, (0, 1, 2, 3), (), id="all-gpus-timed-no-pool"),
        pytest.param(None, [3], 2, None, (0, 1, 2), (3, 3), id="pool-on-held-back-gpu"),
        pytest.param([1, 2], [0], 3, None, (1, 2), (0, 0, 0), id="explicit-lists"),
        pytest.param(None, [2, 3], 3, None, (0, 1), (2, 3, 2), id="pool-round-robin"),
        pytest.param(None, [], 1, 2, (0, 1), (), id="max-parallel-caps-timed"),
        pytest.param(None, [3], 0, None, (0, 1, 2), (), id="zero-slots-no-pool"),
    ],
)
def test_cuda_slots(
    gpus: list[int] | None,
    correctness_gpus: list[int],
    slots: int,
    max_timed: int | None,
    timed: tuple[int, ...],
    correctness: tuple[int, ...],
) -> None:
    plan = plan_slots("cuda", [0, 1, 2, 3], gpus, correctness_gpus, slots, max_timed)
    assert plan.timed == timed
    assert plan.correctness == correctness
    assert len(set(plan.timed)) == len(plan.timed), "two timed slots share a GPU"
    assert not set(plan.timed) & set(plan.correctness), "correctness work on a timing GPU"


@pytest.mark.parametrize(
    ("gpus", "correctness_gpus", "slots", "shared", "correctness"),
    [
        pytest.param(None, [], 1, 2, (0, 1, 2, 3, 0, 1, 2, 3), id="two-screens-beside-each"),
        pytest.param([1], [], 1, 3, (1, 1, 1), id="beside-the-listed-gpu"),
        pytest.param(None, [3], 2, 2, (3, 3), id="held-back-gpus-win"),
        pytest.param(None, [], 0, 2, (), id="zero-slots-no-pool-at-all"),
        pytest.param(None, [], 1, 0, (), id="zero-shared-no-pool"),
    ],
)
def test_screens_share_the_timed_gpus_without_correctness_gpus(
    gpus: list[int] | None,
    correctness_gpus: list[int],
    slots: int,
    shared: int,
    correctness: tuple[int, ...],
) -> None:
    plan = plan_slots("cuda", [0, 1, 2, 3], gpus, correctness_gpus, slots, None, shared)
    assert plan.correctness == correctness
    assert len(set(plan.timed)) == len(plan.timed), "two timed slots share a GPU"


def test_config_refuses_negative_shared_screens() -> None:
    with pytest.raises(ConfigError, match=r"executor\.screens_per_timed_gpu"):
        ExecutorConfig(screens_per_timed_gpu=-1)


def test_cpu_has_one_timed_slot_and_the_pool() -> None:
    plan = plan_slots("cpu", [], None, [], 2, None)
    assert plan.timed == (None,)
    assert plan.correctness == (None, None)


@pytest.mark.parametrize(
    ("gpus", "correctness_gpus", "needle"),
    [
        pytest.param([5], [], "not visible", id="unknown-gpu"),
        pytest.param(None, [0, 1], "no GPU left", id="all-held-back"),
    ],
)
def test_bad_gpu_lists(gpus: list[int] | None, correctness_gpus: list[int], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        plan_slots("cuda", [0, 1], gpus, correctness_gpus, 1, None)


def test_config_refuses_a_gpu_in_both_pools() -> None:
    with pytest.raises(ConfigError, match=r"executor\.correctness_gpus"):
        ExecutorConfig(gpus=[0, 1], correctness_gpus=[1])


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert visible_gpus() == [2, 3]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1a2b")
    with pytest.raises(ConfigError, match=r"executor\.gpus"):
        visible_gpus()


@pytest.mark.parametrize(
    ("device", "gpus", "cpus", "timed_actors", "held", "slots", "expected"),
    [
        pytest.param("cpu", 0, 2, None, 0, 1, (1, 1, 0.0), id="cpu-default"),
        pytest.param("cuda", 8, 64, None, 0, 1, (8, 0, 0.0), id="cuda-no-pool"),
        pytest.param("cuda", 8, 64, None, 1, 2, (7, 2, 0.5), id="cuda-one-gpu-shared-by-2"),
        pytest.param("cuda", 2, 64, 1, 0, 0, (1, 0, 0.0), id="cuda-fixed-count"),
    ],
)
def test_actor_plan(
    device: str,
    gpus: int,
    cpus: int,
    timed_actors: int | None,
    held: int,
    slots: int,
    expected: tuple[int, int, float],
) -> None:
    plan = plan_actors(device, gpus, cpus, timed_actors, held, slots, None)
    assert (plan.timed, plan.correctness, plan.correctness_gpu_share) == expected


@pytest.mark.parametrize(
    ("device", "gpus", "cpus", "timed_actors", "needle"),
    [
        pytest.param("cuda", 2, 64, 3, "2 GPUs", id="more-timed-actors-than-gpus"),
        pytest.param("cpu", 0, 1, None, "1 CPUs", id="pool-does-not-fit-cpus"),
    ],
)
def test_actor_plan_refuses_a_small_cluster(
    device: str, gpus: int, cpus: int, timed_actors: int | None, needle: str
) -> None:
    with pytest.raises(ConfigError, match=needle):
        plan_actors(device, gpus, cpus, timed_actors, 0, 1, None)
