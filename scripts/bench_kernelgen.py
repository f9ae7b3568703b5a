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

`--check-only` measures the generator's reach instead of its speed: no timing and no
torch.compile; every workload of the file is checked against the reference with the workload's
tolerance (on the CPU under Triton's interpreter, so on small shapes), and the summary counts
the problems whose generated solution has at least one fused Triton kernel and passes them all,
with the failures by cause. `--problem-time-s` caps each problem (its worker is killed).

    python scripts/bench_kernelgen.py DIR... --device cpu --check-only --jobs 2 \
        --problem-time-s 300 --json reach.json --markdown reach.md
"""

import argparse
import fcntl
import json
import math
import multiprocessing as mp
import os
import queue
import signal
import sys
import tempfile
import time
import traceback
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))  # its kernelgen_reach module
from kernelgen_reach import check_problem, compare_outputs, load_module, reach_markdown  # noqa: E402

VARIANTS: dict[str, dict[str, int]] = {
    "gen-default": {},
    "gen-cublas": {"FUSE_GEMM": 0},
    "gen-tf32": {"DOT_PRECISION": 1},
    "gen-rows1": {"ROWS": 1, "NUM_WARPS_RED": 4},
    # Convolutions' layout forced either way (the CUDA default is nhwc where it qualifies).
    "gen-nchw": {"LAYOUT_CONV": 0},
    "gen-nhwc": {"LAYOUT_CONV": 1},
    # A convolution's bias added by cuDNN, not in the kernels reading its output.
    "gen-cudnn-bias": {"FUSE_CONV_BIAS": 0},
    # Attention: scores stored and read twice (three kernels), or other online-softmax tiles.
    "gen-noflash": {"FLASH": 0},
    "gen-flash-m64": {"FLASH_M": 64},
    "gen-flash-n128": {"FLASH_N": 128, "NUM_STAGES": 2},
    # Attention that scaled_dot_product_attention computes exactly as that call, or not.
    "gen-sdpa": {"FUSE_SDPA": 1},
    "gen-nosdpa": {"FUSE_SDPA": 0},
}
#: Timed when --variants is not given.
DEFAULT_VARIANTS = ("gen-default", "gen-cublas", "gen-tf32", "gen-rows1")
LOCK = Path(tempfile.gettempdir()) / "kernelarc-bench-gpu.lock"


@contextmanager
def gpu_lock() -> Any:
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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
    from kernelarc.runner.correctness import collect_outputs

    expected = collect_outputs(reference(*inputs), definition, device)
    return compare_outputs(fn(*inputs), expected, definition, workload, device)


def bench_problem(
    problem_dir: str, workload_file: str, device: str, index: int, variants: list[str]
) -> dict[str, Any]:
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
            _measure(row, path, definition, workload, traces, device, variants)
        finally:
            if device == "cuda":
                torch.cuda.empty_cache()
    return row


def _measure(
    row: dict[str, Any],
    path: Path,
    definition: Any,
    workload: Any,
    traces: Any,
    device: str,
    variants: list[str],
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
    target: Literal["cuda", "cpu"] = "cuda" if device == "cuda" else "cpu"
    timed: dict[str, str] = {}  # source -> the variant that timed it
    for variant in variants:
        knobs = VARIANTS[variant]
        try:
            generated = generate(definition, traces, default_knobs(target) | knobs, target, "gen")
            same = timed.setdefault(generated.source, variant)
            if same != variant:  # the knobs do not change this problem's kernels: not re-timed
                row[f"{variant}_ms"] = row.get(f"{same}_ms")
                row[f"{variant}_same_as"] = same
                continue
            source = work / f"{variant.replace('-', '_')}.py"
            source.write_text(generated.source)
            module = load_module(source, f"_kg_bench_{variant.replace('-', '_')}")
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


def _worker(jobs: Any, results: Any, args: argparse.Namespace) -> None:
    # Its own process group, so a problem's timeout also kills the tracer it may be waiting on.
    os.setpgrp()
    while True:
        try:
            problem_dir = jobs.get_nowait()
        except queue.Empty:
            return
        results.put(("start", os.getpid(), problem_dir))
        try:
            if args.check_only:
                variants = {v: VARIANTS[v] for v in args.variants}
                exclusive = gpu_lock if args.device == "cuda" else nullcontext
                row = check_problem(problem_dir, args.workloads, args.device, variants, exclusive)
            else:
                row = bench_problem(
                    problem_dir, args.workloads, args.device, args.workload_index, args.variants
                )
        except Exception:  # recorded; the worker goes on with the next problem
            row = {"problem": Path(problem_dir).name, "error": traceback.format_exc()[-600:]}
        results.put(("row", os.getpid(), row))
        if "error" in row and "CUDA" in str(row.get("error")):
            return  # a poisoned context: let the parent start a fresh worker


def _best_gen(row: dict[str, Any]) -> float | None:
    best = _best_variant(row)
    return None if best is None else float(row[f"{best}_ms"])


def _best_variant(row: dict[str, Any]) -> str | None:
    """The fastest variant that passed the workload's tolerance."""
    timed = [
        (row[f"{v}_ms"], v)
        for v in VARIANTS
        if isinstance(row.get(f"{v}_ms"), float) and f"{v}_same_as" not in row
    ]
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
    parser.add_argument(
        "--problem-time-s", type=float, default=0.0, help="per problem; 0: no limit"
    )
    parser.add_argument(
        "--check-only",
        action="store_true",
        help="check every workload, time nothing: the generator's reach",
    )
    parser.add_argument(
        "--variants",
        help=f"comma-separated, of {', '.join(VARIANTS)} (default: "
        f"{','.join(DEFAULT_VARIANTS)}; gen-default with --check-only)",
    )
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
    default = "gen-default" if args.check_only else ",".join(DEFAULT_VARIANTS)
    args.variants = [v.strip() for v in (args.variants or default).split(",") if v.strip()]
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {unknown}; choose from {list(VARIANTS)}")
    if args.device == "cpu":
        # Triton reads it at import: the spawned workers inherit it (tracing drops it).
        os.environ["TRITON_INTERPRET"] = "1"
    rows = _run(args)
    rows.sort(key=lambda r: str(r.get("problem")))
    table = reach_markdown(rows, args.variants) if args.check_only else markdown(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.markdown:
        args.markdown.write_text(table)
    print(table)
    return 0


def _run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every problem through the worker pool; a problem over `--problem-time-s` has its worker
    killed and is recorded as a timeout."""
    ctx = mp.get_context("spawn")
    jobs, results = ctx.Queue(), ctx.Queue()
    for problem in args.problems:
        jobs.put(problem)
    deadline = time.monotonic() + args.total_time_s if args.total_time_s else math.inf
    rows: list[dict[str, Any]] = []
    workers: dict[int, Any] = {}
    running: dict[int, tuple[str, float]] = {}
    while len(rows) < len(args.problems) and time.monotonic() < deadline:
        workers = {pid: w for pid, w in workers.items() if w.is_alive()}
        for pid, (problem, since) in list(running.items()):
            if pid not in workers:  # died without a row (killed by the OOM killer, a crash)
                rows.append({"problem": Path(problem).name, "error": "the worker died"})
                running.pop(pid)
            elif args.problem_time_s and time.monotonic() - since > args.problem_time_s:
                _kill_group(workers.pop(pid))
                running.pop(pid)
                rows.append(
                    {
                        "problem": Path(problem).name,
                        "error": f"timeout after {args.problem_time_s:.0f} s",
                    }
                )
        while len(workers) < args.jobs and not jobs.empty():
            worker = ctx.Process(target=_worker, args=(jobs, results, args), daemon=True)
            worker.start()
            assert worker.pid is not None
            workers[worker.pid] = worker
        try:
            kind, pid, payload = results.get(timeout=2)
        except queue.Empty:
            if not workers and jobs.empty():
                break
            continue
        if kind == "start":
            running[pid] = (payload, time.monotonic())
            continue
        running.pop(pid, None)
        rows.append(payload)
        print(json.dumps(payload), flush=True)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
    for worker in workers.values():
        _kill_group(worker)
    return rows


def _kill_group(worker: Any) -> None:
    """The worker and whatever it started (a tracer), then reaped."""
    with suppress(ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)
    worker.join(timeout=10)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
