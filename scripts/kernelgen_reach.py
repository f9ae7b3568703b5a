"""The kernel generator's reach: `scripts/bench_kernelgen.py --check-only`.

Place in the flow: the benchmark's workers call `check_problem` per problem dir (trace, generate
at each variant's knobs, check every workload against the reference with its tolerance; on the
CPU under Triton's interpreter), and `reach_markdown` sums the rows up: how many problems get a
fused Triton kernel that passes everywhere, and the rest by cause. Nothing is timed. A helper
module of the benchmark, not a script.
"""

import importlib.util
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Literal


def load_module(path: Path, name: str) -> Any:
    """A generated source file, imported."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def check_problem(
    problem_dir: str,
    workload_file: str,
    device: str,
    variants: dict[str, dict[str, int]],
    exclusive: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> dict[str, Any]:
    """The generator's reach on one problem: every workload checked, nothing timed. `variants`
    maps a name to its knobs over the defaults; what holds device memory runs inside
    `exclusive()` (the benchmark's host-wide GPU lock), tracing outside it."""
    import gc

    import torch

    from kernelarc.kernelgen import default_knobs, generate
    from kernelarc.kernelgen.traces import load_traces, workload_files
    from kernelarc.problems.files import load_problem
    from kernelarc.runner.correctness import collect_outputs
    from kernelarc.runner.inputs import generate_inputs, seed_everything
    from kernelarc.runner.interpreter_rounding import install
    from kernelarc.runner.staging import load_reference

    if device == "cpu":
        install()  # bfloat16 casts round as on a GPU, as in the runner

    path = Path(problem_dir)
    problem = load_problem(path, workload_file)
    definition = problem.definition
    row: dict[str, Any] = {"problem": definition.name, "workloads": len(problem.workloads)}
    started = time.monotonic()
    traces = load_traces(path, workload_files(path, workload_file))
    row["trace_s"] = round(time.monotonic() - started, 1)
    if isinstance(traces, str):
        row["gen_error"] = f"trace: {traces}"
        return row
    work = Path(tempfile.mkdtemp(prefix="kernelarc-bench-kg-"))
    reference = load_reference(definition, work)
    custom = getattr(reference, definition.custom_inputs_entrypoint or "", None)
    target: Literal["cuda", "cpu"] = "cuda" if device == "cuda" else "cpu"

    def fresh_inputs(workload: Any) -> list[Any]:
        # The same seed for both sides, and inputs of their own: a reference that changes an
        # input in place (training-mode BatchNorm) must not hand the candidate changed inputs.
        seed_everything(2024)
        return generate_inputs(definition, workload, device, str(path), custom)

    for variant, knobs in variants.items():
        try:
            generated = generate(definition, traces, default_knobs(target) | knobs, target, variant)
        except Exception as exc:  # the generator's refusal is the result
            row[f"{variant}_error"] = f"{type(exc).__name__}: {exc}"[:300]
            continue
        if "kernels" not in row:
            row["kernels"] = generated.kernels
            row["kinds"] = sorted(generated.kinds)
            row["externs"] = list(generated.externs)
            row["summary"] = generated.summary()
        source = work / f"{variant.replace('-', '_')}.py"
        source.write_text(generated.source)
        passed = 0
        try:
            module = load_module(source, f"_kg_check_{variant.replace('-', '_')}")
            with exclusive():
                for workload in problem.workloads:
                    expected = collect_outputs(
                        reference.run(*fresh_inputs(workload)), definition, device
                    )
                    got = module.run(*fresh_inputs(workload))
                    error = compare_outputs(got, expected, definition, workload, device)
                    del got
                    if error:
                        row[f"{variant}_error"] = f"{workload.uuid}: {error}"[:300]
                        break
                    passed += 1
                gc.collect()
                if device == "cuda":
                    torch.cuda.empty_cache()
        except Exception as exc:  # a crash of the generated code is a result
            row[f"{variant}_error"] = f"{type(exc).__name__}: {exc}"[:300]
        row[f"{variant}_passed"] = passed
    return row


def compare_outputs(
    got: Any, expected: list[Any], definition: Any, workload: Any, device: str
) -> str:
    """Why `got` (what a solution returned) fails the workload against the collected
    reference outputs `expected`, or ""."""
    from kernelarc.runner.correctness import collect_outputs, compare

    outs = collect_outputs(got, definition, device)
    for name, out, ref in zip(definition.outputs, outs, expected, strict=True):
        if out.shape != ref.shape or out.dtype != ref.dtype:
            return f"{name}: {tuple(out.shape)} {out.dtype} vs {tuple(ref.shape)} {ref.dtype}"
        result = compare(out, ref, workload.tolerance, name)
        if not result.ok:
            return result.reason or "incorrect"
    return ""


def reach_markdown(rows: list[dict[str, Any]], variants: list[str]) -> str:
    """`--check-only`: a line per problem and the generator's reach over them."""
    lines = [
        "| problem | workloads | " + " | ".join(variants) + " | plan | first failure |",
        "| --- | --- | " + " | ".join("---" for _ in variants) + " | --- | --- |",
    ]
    causes: Counter[str] = Counter()
    traced = generated = with_kernel = passing = 0
    for row in rows:
        if "error" not in row and not str(row.get("gen_error", "")).startswith("trace: "):
            traced += 1
        results, failure = [], ""
        for variant in variants:
            error = row.get(f"{variant}_error")
            passed = row.get(f"{variant}_passed")
            results.append(
                "fail"
                if error
                else f"{passed}/{row.get('workloads')}"
                if passed is not None
                else "-"
            )
            failure = failure or (error or "")
        failure = failure or row.get("gen_error") or row.get("error", "")
        if "kernels" in row:
            generated += 1
        kernel = row.get("kernels", 0) > 0
        with_kernel += kernel
        ok = kernel and not any(row.get(f"{v}_error") for v in variants)
        passing += ok
        if failure:
            causes[failure_cause(str(failure))] += 1
        elif not kernel and "kernels" in row:
            causes["no fused kernel (torch calls only)"] += 1
        plan = row.get("summary") or "-"
        lines.append(
            f"| {row['problem']} | {row.get('workloads', '-')} | {' | '.join(results)} "
            f"| {plan} | {str(failure).splitlines()[-1][:120] if failure else ''} |"
        )
    total = len(rows)
    lines += [
        "",
        f"{total} problems: traced {traced}, generated {generated}, with a fused Triton kernel "
        f"{with_kernel}, a fused Triton kernel passing every workload in every variant "
        f"{passing} ({100 * passing / max(total, 1):.0f} %)",
        "",
        "| not passing, by cause | problems |",
        "| --- | --- |",
    ]
    lines += [f"| {cause} | {count} |" for cause, count in causes.most_common()]
    return "\n".join(lines) + "\n"


def failure_cause(failure: str) -> str:
    """A failure's class, for counting: a timeout, a trace failure, a generator refusal, a
    mismatch, or the exception type."""
    if failure.startswith("timeout"):
        return "timeout"
    if failure.startswith("trace: "):
        return "trace failed"
    if failure.startswith("GenerationError"):
        return "generator: " + failure.split(": ", 1)[1].split(";")[0][:60]
    if "Traceback" in failure:
        last = failure.strip().splitlines()[-1]
        return last.split(":")[0][:60]
    head = failure.split(": ", 1)
    if (
        len(head) == 2
        and head[0].replace("_", "").replace("-", "").isalnum()
        and ("Error" in head[0] or "Exception" in head[0])
    ):
        return head[0]
    return "wrong result or shape"
