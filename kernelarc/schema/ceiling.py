"""A GPU's measured peak rates (copy bandwidth, dense bfloat16 matmul), as the probe prints them
and the host caches them: the record shared by `kernelarc/runner/ceiling_probe.py` (which
measures, with torch) and `kernelarc/guard/ceilings.py` (which caches and resolves, without)."""

from pydantic import Field

from kernelarc.schema.base import RecordModel


class MeasuredCeiling(RecordModel):
    """One GPU's measured peak rates, as cached."""

    device: str
    """GPU name as nvidia-smi and torch report it (e.g. `NVIDIA H200`)."""
    driver: str
    """Driver version (nvidia-smi); a new driver is measured again."""
    copy_bytes_per_s: float = Field(gt=0)
    """Device-to-device copy: bytes read + written per second."""
    matmul_flops_per_s: float = Field(gt=0)
    """Dense bfloat16 matmul rate on random data."""
    measured_at: str
    """ISO time of the measurement."""
    method: str
    """How it was measured (sizes, dtype, statistic)."""
