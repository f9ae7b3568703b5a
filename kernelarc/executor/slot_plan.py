"""Which GPU each evaluation slot gets: the timed pool and the correctness pool.

Pure apart from `visible_gpus`, which reads $CUDA_VISIBLE_DEVICES or asks `nvidia-smi -L`.
Rules: one timed slot per GPU (one on the CPU), so timed evaluations never share a GPU; on CUDA
the correctness pool runs on GPUs taken out of the timed pool, or, when none is, beside the timed
slots on their GPUs (`shared_per_gpu` slots each; the executor's `DeviceGate` keeps screens off a
GPU while the guard times there).
"""

import os
import shutil
import subprocess
from dataclasses import dataclass

from kernelarc.errors import ConfigError


@dataclass(frozen=True)
class SlotPlan:
    """GPU of every slot (None on the CPU)."""

    timed: tuple[int | None, ...]
    """One entry per timed slot."""
    correctness: tuple[int | None, ...]
    """One entry per correctness slot (empty: no pool)."""


def visible_gpus() -> list[int]:
    """Indices of the GPUs this process may use: $CUDA_VISIBLE_DEVICES when it lists indices,
    else every GPU `nvidia-smi -L` lists (none without nvidia-smi).

    Raises:
        ConfigError: $CUDA_VISIBLE_DEVICES holds GPU UUIDs (set executor.gpus to indices).
    """
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None and listed.strip():
        parts = [p.strip() for p in listed.split(",") if p.strip()]
        if not all(p.isdigit() for p in parts):
            msg = (
                f"CUDA_VISIBLE_DEVICES={listed!r} is not a list of GPU indices; set "
                "executor.gpus=[0,1,...] to the indices the campaign may use"
            )
            raise ConfigError(msg)
        return [int(p) for p in parts]
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return list(range(sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))))


def plan_slots(
    device: str,
    visible: list[int],
    gpus: list[int] | None,
    correctness_gpus: list[int],
    correctness_slots: int,
    max_timed: int | None,
    shared_per_gpu: int = 0,
) -> SlotPlan:
    """The local executor's slots.

    Args:
        device: `cpu` or `cuda`.
        visible: GPUs this process may use (`visible_gpus()`).
        gpus: executor.gpus (None: every visible GPU not in `correctness_gpus`).
        correctness_gpus: executor.correctness_gpus (CUDA only).
        correctness_slots: executor.correctness_slots.
        max_timed: budget.max_parallel (None: no cap).
        shared_per_gpu: executor.screens_per_timed_gpu (CUDA, no `correctness_gpus`).

    Raises:
        ConfigError: a listed GPU is not visible, or no GPU is left for timing.
    """
    if device != "cuda":
        return SlotPlan(timed=(None,), correctness=(None,) * correctness_slots)
    unknown = sorted((set(gpus or ()) | set(correctness_gpus)) - set(visible))
    if unknown:
        msg = (
            f"executor.gpus / executor.correctness_gpus name GPUs {unknown} that are not visible "
            f"(visible: {visible}); list indices from nvidia-smi -L"
        )
        raise ConfigError(msg)
    timed = list(gpus) if gpus is not None else [g for g in visible if g not in correctness_gpus]
    if max_timed is not None:
        timed = timed[:max_timed]
    if not timed:
        msg = (
            f"no GPU left for timed evaluations (visible {visible}, executor.correctness_gpus "
            f"{correctness_gpus}); leave at least one GPU out of executor.correctness_gpus"
        )
        raise ConfigError(msg)
    correctness: tuple[int | None, ...] = ()
    if correctness_gpus and correctness_slots:
        count = len(correctness_gpus)
        correctness = tuple(correctness_gpus[i % count] for i in range(correctness_slots))
    elif correctness_slots and shared_per_gpu:
        correctness = tuple(gpu for _ in range(shared_per_gpu) for gpu in timed)
    return SlotPlan(timed=tuple(timed), correctness=correctness)


@dataclass(frozen=True)
class ActorPlan:
    """How many Ray actors of each pool, and the GPU share of a correctness actor."""

    timed: int
    """Timed actors (one whole GPU each on CUDA)."""
    correctness: int
    """Correctness actors (0: no pool)."""
    correctness_gpu_share: float
    """`num_gpus` of each correctness actor (0 on the CPU)."""


def plan_actors(
    device: str,
    cluster_gpus: int,
    cluster_cpus: int,
    timed_actors: int | None,
    correctness_gpus: int,
    correctness_slots: int,
    max_timed: int | None,
) -> ActorPlan:
    """The Ray executor's actors for a cluster with `cluster_gpus` GPUs and `cluster_cpus` CPUs.

    On CUDA, `correctness_gpus` whole GPUs are held back for the correctness actors, which share
    them (fractional `num_gpus`); every other GPU gets one timed actor with `num_gpus=1`, so Ray
    itself keeps correctness work off the timing GPUs. Every actor also takes one CPU.

    Raises:
        ConfigError: the cluster is too small for the actors asked for.
    """
    held = correctness_gpus if device == "cuda" and correctness_slots else 0
    if device == "cuda":
        timed = timed_actors if timed_actors is not None else cluster_gpus - held
    else:
        timed = timed_actors if timed_actors is not None else 1
    if max_timed is not None:
        timed = min(timed, max_timed)
    correctness = correctness_slots if device != "cuda" or held else 0
    if timed < 1 or (device == "cuda" and timed + held > cluster_gpus):
        msg = (
            f"the Ray cluster has {cluster_gpus} GPUs: not enough for {max(timed, 1)} timed "
            f"actors (one GPU each) and {held} GPUs for the correctness pool; lower "
            "executor.ray.timed_actors or executor.correctness_gpus, or add GPUs"
        )
        raise ConfigError(msg)
    if timed + correctness > cluster_cpus:
        msg = (
            f"the Ray cluster has {cluster_cpus} CPUs: not enough for {timed} timed and "
            f"{correctness} correctness actors of one CPU each; lower executor.ray.timed_actors "
            "or executor.correctness_slots, or raise executor.ray.num_cpus"
        )
        raise ConfigError(msg)
    share = min(1.0, held / correctness) if correctness and device == "cuda" else 0.0
    return ActorPlan(timed=timed, correctness=correctness, correctness_gpu_share=share)
