"""Measure this process's CUDA device: copy bandwidth and dense bfloat16 matmul rate.

Place in the flow: `kernelarc.guard.ceilings.measure_in_subprocess` runs
`python -m kernelarc.runner.ceiling_probe --json` in a child process with one GPU visible, at
campaign start on a cache miss, before any candidate touches the GPU; the host never imports
torch for it. Lives with the runner because it is torch code (issue #19: every torch import in
`kernelarc/runner/`, `kernelarc/tracing/` and the KernelBench converter).

What is measured:
- copy: a device-to-device copy of a 1 GiB buffer, bytes read + written per second (median of
  20 timed copies after 5 warm-ups, CUDA events);
- matmul: an 8192^3 bfloat16 matmul on random normal data (not zeros, which run faster), 2*n^3
  FLOP per product (median of 10 after 3 warm-ups).
"""

import argparse
import statistics
import sys
from datetime import UTC, datetime

from kernelarc.schema.ceiling import MeasuredCeiling

COPY_BYTES = 1 << 30
MATMUL_N = 8192
#: A measurement outside these is an error, not a ceiling (bytes/s, FLOP/s).
SANE_COPY = (1e10, 1e14)
SANE_MATMUL = (1e12, 1e17)


def measure_here(driver: str = "unknown") -> MeasuredCeiling:  # pragma: no cover - needs a GPU
    """Measure the current CUDA device (imports torch; run it in its own process).

    Raises:
        RuntimeError: no GPU, or a rate outside the sane ranges.
    """
    import torch

    if not torch.cuda.is_available():
        msg = "no CUDA device is visible"
        raise RuntimeError(msg)
    name = torch.cuda.get_device_name()

    def timed_ms(fn: object, warmup: int, iterations: int) -> float:
        assert callable(fn)
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(iterations):
            start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(float(start.elapsed_time(end)))
        return float(statistics.median(times))

    def copy_ms() -> float:
        src = torch.ones(COPY_BYTES, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        return timed_ms(lambda: dst.copy_(src), 5, 20)

    def matmul_ms() -> float:
        a = torch.randn(MATMUL_N, MATMUL_N, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(MATMUL_N, MATMUL_N, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(a)
        return timed_ms(lambda: torch.matmul(a, b, out=out), 3, 10)

    copy_rate = 2 * COPY_BYTES / (copy_ms() / 1e3)
    mm_rate = 2 * MATMUL_N**3 / (matmul_ms() / 1e3)
    if not (SANE_COPY[0] < copy_rate < SANE_COPY[1] and SANE_MATMUL[0] < mm_rate < SANE_MATMUL[1]):
        msg = f"implausible ceilings: copy {copy_rate:.3g} B/s, matmul {mm_rate:.3g} FLOP/s"
        raise RuntimeError(msg)
    return MeasuredCeiling(
        device=name,
        driver=driver,
        copy_bytes_per_s=copy_rate,
        matmul_flops_per_s=mm_rate,
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        method=(
            f"copy: {COPY_BYTES >> 20} MiB device-to-device, read+write, median of 20; "
            f"matmul: {MATMUL_N}^3 bfloat16 randn, median of 10; CUDA events; "
            f"torch {torch.__version__}"
        ),
    )


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - needs a GPU
    """`python -m kernelarc.guard.ceilings [--json]`: measure the visible GPU and print it."""
    parser = argparse.ArgumentParser(description="Measure this GPU's copy and matmul ceilings.")
    parser.add_argument("--json", action="store_true", help="print one JSON line only")
    parser.add_argument("--driver", default="unknown", help="driver version to record")
    args = parser.parse_args(argv)
    try:
        measured = measure_here(args.driver)
    except RuntimeError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    if args.json:
        sys.stdout.write(measured.model_dump_json() + "\n")
    else:
        sys.stdout.write(
            f"{measured.device} (driver {measured.driver}): copy "
            f"{measured.copy_bytes_per_s / 1e12:.2f} TB/s, bf16 matmul "
            f"{measured.matmul_flops_per_s / 1e12:.0f} TFLOP/s\n"
        )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
