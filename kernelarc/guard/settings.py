"""From the typed config to what the guard records: per-device settings and roofline bounds.

Place in the flow: the campaign loop calls `guard_settings` once per campaign and
`roofline_for` per judged attempt, with the ceiling it resolved at start (`ceilings.py`:
measured on CUDA, else configured); without one, the GPU name from the attempt's traces picks
the configured ceiling.
"""

from kernelarc.config import GuardConfig
from kernelarc.guard.ceilings import ResolvedCeiling
from kernelarc.guard.roofline import Ceiling, roofline_bounds
from kernelarc.schema import Definition, Workload
from kernelarc.schema.guard_record import GuardSettings, RooflineBound


def guard_settings(cfg: GuardConfig, device: str) -> GuardSettings:
    """The recorded settings for a device (`max_repeats: null` resolves per device here)."""
    low, high = cfg.repeats_for(device)
    roofline_on = cfg.enabled and cfg.roofline.enabled
    return GuardSettings(
        enabled=cfg.enabled,
        block_static=cfg.block_static,
        min_gain=cfg.min_gain,
        min_repeats=low,
        max_repeats=high,
        confidence=cfg.confidence,
        resamples=cfg.resamples,
        bootstrap_seed=cfg.bootstrap_seed,
        confirm=cfg.enabled and cfg.confirm,
        roofline_slack=cfg.roofline.slack if roofline_on else None,
        infra_retries=cfg.infra_retries,
    )


def roofline_for(
    cfg: GuardConfig,
    definition: Definition,
    workloads: list[Workload],
    device: str,
    hardware: str,
    resolved: ResolvedCeiling | None = None,
) -> tuple[str, list[RooflineBound]]:
    """(ceiling key, bound per workload); ('', []) when the check is off.

    `resolved` (the campaign's measured or configured ceiling) wins over the table lookup by
    `hardware`. A definition whose axes a workload does not resolve gets no bounds (the runner
    reports that workload's error; the guard does not guess).
    """
    if not (cfg.enabled and cfg.roofline.enabled):
        return "", []
    if resolved is not None:
        key = resolved.key
        ceiling = Ceiling(resolved.copy_bytes_per_s, resolved.matmul_flops_per_s)
    else:
        key, configured = cfg.roofline.ceiling_for(device, hardware)
        ceiling = Ceiling(configured.copy_bytes_per_s, configured.matmul_flops_per_s)
    try:
        bounds = roofline_bounds(definition, workloads, ceiling)
    except (ValueError, KeyError):
        return key, []
    return key, bounds
