"""Kernel-level benchmark of the kernel generator: generated Triton vs eager vs torch.compile.

For every problem dir given (KernelBench problems converted by `kernelarc problems import`,
the built-ins, your own), on one workload of its workload file: the reference eager, the
reference under `torch.compile` (default mode), and the generated solution at a few knob
settings, each checked against the reference with the workload's tolerance and timed with the
evaluator's own protocol (`kernelarc.runner.timing.measure_latency`: 10 warm-up and 50 timed
calls, L2 flushed, fresh input addresses, median; CUPTI when available). No sandbox, no guard:
this measures the generator's kernels, not a campaign (`scripts/bench_suite.py` does that).

Problems run in `--jobs` worker processes; tracing overlaps, and everything that holds GPU
memory (inputs, eager, torch.compile, the generated variants) runs under a host-wide lock, so
no two measurements share the GPU and large problems cannot run each other out of memory. A
problem that crashes its worker (an illegal address poisons the CUDA context) is recorded as
such and the next one gets a fresh worker.

    python scripts/bench_kernelgen.py DIR [DIR ...] --device cuda --workloads workload_gpu.jsonl \
        --json out.json --markdown out.md [--jobs 4] [--total-time-s 480]
"""

import argparse
import fcntl
import json
import math
import multiprocessing as mp
import os
import queue
import sys
import tempfile
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS: dict[str, dict[str, int]] = {
    "gen-default": {},
    "gen-cublas": {"FUSE_GEMM": 0},
    "gen-tf32": {"DOT_PRECISION": 1},
    "gen-rows1": {"ROWS": 1, "NUM_WARPS_RED": 4},
}
LOCK = Path(tempfile.gettempdir()) / "kernelarc-bench-gpu.lock"


@contextmanager
def gpu_lock() -> Any:
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _load_module(path: Path, name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _time(fn: Any, inputs: list[Any], device: str) -> tuple[float, str]:
    import torch

    from kernelarc.runner.memory_pool import ShiftingInputPool
    from kernelarc.runner.timing import measure_latency

    # The official protocol on CUDA; on the CPU (Triton's interpreter) a pipeline check only.
    warmup, iterations = (10, 50) if device == "cuda" else (1, 3)
    pool = ShiftingInputPool(inputs, [], warmup + iterations)
    samples = measure_latency(
        fn, pool.next_args, device=device, warmup=warmup, iterations=iterations
    )
    if device == "cuda":
        torch.cuda.synchronize()
    ordered = sorted(samples.samples_ms)
    return ordered[len(ordered) // 2], samples.method


def _check(
    fn: Any, reference: Any, inputs: list[Any], definition: Any, workload: Any, device: str
) -> str:
    from kernelarc.runner.correctness import collect_outputs, compare

    expected = collect_outputs(reference(*inputs), definition, device)
    got = collect_outputs(fn(*inputs), definition, device)
    for name, out, ref in zip(definition.outputs, got, expected, strict=True):
        if out.shape != ref.shape or out.dtype != ref.dtype:
            return f"{name}: {tuple(out.shape)} {out.dtype} vs {tuple(ref.shape)} {ref.dtype}"
        result = compare(out, ref, workload.tolerance, name)
        if not result.ok:
            return result.reason or "incorrect"
    return ""


def bench_problem(problem_dir: str, workload_file: str, device: str, index: int) -> dict[str, Any]:
    """All measurements of one problem (runs in a worker process)."""
    import torch

    from kernelarc.kernelgen.traces import load_traces, workload_files
    from kernelarc.problems.files import load_problem

    path = Path(problem_dir)
    problem = load_problem(path, workload_file)
    definition = problem.definition
    workload = problem.workloads[min(index, len(problem.workloads) - 1)]
    row: dict[str, Any] = {"problem": definition.name, "workload": workload.uuid}
    started = time.monotonic()
    traces = load_traces(path, workload_files(path, workload_file))
    row["trace_s"] = round(time.monotonic() - started, 1)
    # Everything that holds GPU memory or times runs under the host-wide lock (KernelBench
    # inputs reach tens of GiB: six problems at once ran out of memory); tracing runs outside.
    with gpu_lock():
        try:
            _measure(row, path, definition, workload, traces, device)
        finally:
            if device == "cuda":
                torch.cuda.empty_cache()
    return row


def _measure(
    row: dict[str, Any], path: Path, definition: Any, workload: Any, traces: Any, device: str
) -> None:
    import gc

    import torch

    from kernelarc.kernelgen import default_knobs, generate
    from kernelarc.runner.inputs import generate_inputs, seed_everything
    from kernelarc.runner.staging import load_reference

    work = Path(tempfile.mkdtemp(prefix="kernelarc-bench-kg-"))
    reference = load_reference(definition, work)
    custom = getattr(reference, definition.custom_inputs_entrypoint or "", None)
    seed_everything(2024)
    inputs = generate_inputs(definition, workload, device, str(path), custom)
    row["eager_ms"], row["method"] = _time(reference.run, inputs, device)
    try:
        compiled = torch.compile(reference.run)
        error = _check(compiled, reference.run, inputs, definition, workload, device)
        row["compile_ms"] = None if error else _time(compiled, inputs, device)[0]
        row["compile_error"] = error or None
    except Exception as exc:  # a compile failure is a result
        row["compile_ms"], row["compile_error"] = None, f"{type(exc).__name__}: {exc}"[:300]
    if isinstance(traces, str):
        row["gen_error"] = traces
        return
    target = "cuda" if device == "cuda" else "cpu"
    for variant, knobs in VARIANTS.items():
        try:
            generated = generate(definition, traces, default_knobs(target) | knobs, target, variant)
            source = work / f"{variant.replace('-', '_')}.py"
            source.write_text(generated.source)
            module = _load_module(source, f"_kg_bench_{variant.replace('-', '_')}")
            row.setdefault("summary", generated.summary())
            error = _check(module.run, reference.run, inputs, definition, workload, device)
            row[f"{variant}_ms"] = None if error else _time(module.run, inputs, device)[0]
            if error:
                row[f"{variant}_error"] = error[:300]
        except Exception as exc:  # any failure of one variant is a result
            row[f"{variant}_ms"] = None
            row[f"{variant}_error"] = f"{type(exc).__name__}: {exc}"[:300]
    del inputs
    gc.collect()


def _worker(jobs: Any, results: Any, workload_file: str, device: str, index: int) -> None:
    while True:
        try:
            problem_dir = jobs.get_nowait()
        except queue.Empty:
            return
        try:
            row = bench_problem(problem_dir, workload_file, device, index)
        except Exception:  # recorded; the worker goes on with the next problem
            row = {"problem": Path(problem_dir).name, "error": traceback.format_exc()[-600:]}
        results.put(row)
        if "error" in row and "CUDA" in str(row.get("error")):
            return  # a poisoned context: let the parent start a fresh worker


def _best_gen(row: dict[str, Any]) -> float | None:
    best = _best_variant(row)
    return None if best is None else float(row[f"{best}_ms"])


def _best_variant(row: dict[str, Any]) -> str | None:
    """The fastest variant that passed the workload's tolerance."""
    timed = [(row[f"{v}_ms"], v) for v in VARIANTS if isinstance(row.get(f"{v}_ms"), float)]
    return min(timed)[1] if timed else None


def markdown(rows: list[dict[str, Any]]) -> str:
    """A table per problem and a summary line."""
    lines = [
        "| problem | eager ms | compile ms | best generated ms | variant | x eager | x compile "
        "| kernels |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    ratios = []
    wins = total = 0
    for row in rows:
        eager, comp, best = row.get("eager_ms"), row.get("compile_ms"), _best_gen(row)
        x_eager = f"{eager / best:.2f}" if eager and best else "-"
        x_comp = f"{comp / best:.2f}" if comp and best else "-"
        if comp and best:
            ratios.append(comp / best)
            total += 1
            wins += best <= comp
        lines.append(
            f"| {row['problem']} | {_f(eager)} | {_f(comp)} | {_f(best)} "
            f"| {_best_variant(row) or '-'} | {x_eager} | {x_comp} "
            f"| {row.get('summary') or row.get('gen_error') or row.get('error', '')[:80]} |"
        )
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        lines.append("")
        lines.append(
            f"generated at least as fast as torch.compile: {wins}/{total}; "
            f"geomean speedup over torch.compile default: {geo:.3f}"
        )
    return "\n".join(lines) + "\n"


def _f(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="+")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--workloads", default="workload.jsonl")
    parser.add_argument("--workload-index", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--total-time-s", type=float, default=0.0, help="0: no limit")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    # A `.kb/*` glob also names the importer's report file: only problem dirs are benchmarked.
    skipped = [p for p in args.problems if not (Path(p) / "definition.json").is_file()]
    if skipped:
        print(f"not problem dirs (no definition.json), skipped: {skipped}", file=sys.stderr)
    args.problems = [p for p in args.problems if p not in skipped]
    if not args.problems:
        parser.error("no problem dir (a dir holding definition.json) among the arguments")
    ctx = mp.get_context("spawn")
    jobs, results = ctx.Queue(), ctx.Queue()
    for problem in args.problems:
        jobs.put(problem)
    deadline = time.monotonic() + args.total_time_s if args.total_time_s else math.inf
    rows: list[dict[str, Any]] = []
    workers: list[Any] = []
    while len(rows) < len(args.problems) and time.monotonic() < deadline:
        workers = [w for w in workers if w.is_alive()]
        while len(workers) < args.jobs and not jobs.empty():
            worker = ctx.Process(
                target=_worker,
                args=(jobs, results, args.workloads, args.device, args.workload_index),
                daemon=True,
            )
            worker.start()
            workers.append(worker)
        try:
            row = results.get(timeout=5)
        except queue.Empty:
            if not workers and jobs.empty():
                break
            continue
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
    for worker in workers:
        worker.kill()
    rows.sort(key=lambda r: str(r.get("problem")))
    table = markdown(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.markdown:
        args.markdown.write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
