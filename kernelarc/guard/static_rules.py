"""The guard's static rule catalogue and the entry point that checks a proposal before evaluation.

Place in the flow: `campaign/loop.py` calls `scan_solution` on every proposal before it reaches a
sandbox; any finding of severity `block` turns the attempt into REJECTED_STATIC. The matching
itself (AST + token-level regexes) lives in `static_scan.py`; this module is the catalogue
(id, severity, one-line rationale), documented as a table in docs/guard.md.
"""

from dataclasses import dataclass

from kernelarc.guard.static_scan import Match, scan_python_source, scan_source_paths
from kernelarc.schema import Solution
from kernelarc.schema.guard_record import Severity, StaticFinding


@dataclass(frozen=True)
class Rule:
    """One static rule of the catalogue."""

    id: str
    """`KA-S0NN`; stable, never reused."""
    severity: Severity
    """block: never evaluated; flag: recorded only."""
    title: str
    """What it matches."""
    rationale: str
    """One line: why it matters."""


RULES: tuple[Rule, ...] = (
    Rule(
        "KA-S001",
        "block",
        "sys.modules / sys.path / sys hooks / sys.argv",
        "rewriting the interpreter's module table, import path or hooks can replace the "
        "evaluator; sys.argv names the result file",
    ),
    Rule(
        "KA-S002",
        "block",
        "builtins, __builtins__, __import__, importlib",
        "dynamic imports and builtin rebinding hide what the code loads or replace open/print",
    ),
    Rule(
        "KA-S003",
        "block",
        "assignment, setattr or delattr on an imported module's attribute",
        "monkeypatching torch, triton, time or the evaluator changes what is measured",
    ),
    Rule(
        "KA-S004",
        "block",
        "timer internals: elapsed_time, cupti",
        "a kernel has no reason to touch the evaluator's clocks",
    ),
    Rule(
        "KA-S005",
        "block",
        "RNG reseeding (manual_seed, set_rng_state, random.seed)",
        "reseeding makes the 'fresh' inputs of later correctness rounds predictable",
    ),
    Rule(
        "KA-S006",
        "block",
        "gc.get_objects / get_referrers / get_referents",
        "walking the heap reaches the reference outputs and the evaluator's objects",
    ),
    Rule(
        "KA-S007",
        "block",
        "frame inspection (sys._getframe, inspect.currentframe, f_back)",
        "reading the caller's frame reaches the reference outputs and the evaluator's locals",
    ),
    Rule(
        "KA-S008",
        "block",
        "threads and processes (threading, multiprocessing, "
        "concurrent.futures, asyncio, torch.jit.fork, os.fork)",
        "hidden workers run outside the timed window (side CUDA streams are allowed)",
    ),
    Rule(
        "KA-S009",
        "block",
        "subprocess, os.system / exec* / spawn* / kill, signal, atexit, os._exit",
        "spawning or ending processes escapes the evaluation or forges results",
    ),
    Rule(
        "KA-S010",
        "block",
        "file I/O (open, pathlib, os.open/write/dup, shutil, tempfile, "
        "pickle, torch.save/load, sys.stdout)",
        "files can carry precomputed outputs or overwrite the result channel",
    ),
    Rule(
        "KA-S011",
        "block",
        "network (socket, urllib, requests, http, ssl, ...)",
        "a kernel needs no network; it can fetch answers or leak the problem",
    ),
    Rule(
        "KA-S012",
        "block",
        "native loading (ctypes, cffi, __loader__, torch.ops.load_library)",
        "native code bypasses every Python-level check",
    ),
    Rule(
        "KA-S013",
        "block",
        "C++ JIT from Python (torch.utils.cpp_extension, load_inline)",
        "the official evaluator disables it for Python languages; C++ goes through the build",
    ),
    Rule(
        "KA-S014",
        "block",
        "functools cache / lru_cache on the entry function",
        "memoizing the entry returns stale outputs across calls instead of computing",
    ),
    Rule(
        "KA-S015",
        "block",
        "module-level store keyed by data_ptr() / id() / hash() of tensors",
        "caching outputs by input identity replays results instead of computing them",
    ),
    Rule(
        "KA-S016",
        "block",
        "hashing tensor contents (hashlib, zlib, xxhash)",
        "content hashes are the key of an output cache",
    ),
    Rule(
        "KA-S017",
        "block",
        "the reference or problem files (_kernelarc_reference, _reference, "
        "definition.json, workload.jsonl, result.json)",
        "calling the reference or reading the problem is not a kernel",
    ),
    Rule(
        "KA-S018",
        "block",
        "imports of kernelarc or sol_execbench",
        "evaluator internals are off limits to candidates",
    ),
    Rule(
        "KA-S019",
        "block",
        "eval, exec, compile, types.CodeType",
        "code built at run time escapes every static rule",
    ),
    Rule(
        "KA-S020",
        "block",
        "object internals (__code__, __globals__, __closure__, __subclasses__)",
        "rewriting function internals patches code without assignment to a module",
    ),
    Rule(
        "KA-S021",
        "block",
        "lazy or subclass outputs (torch.Tensor subclasses, as_subclass, "
        "__torch_function__, __torch_dispatch__)",
        "a lazy tensor defers the work until after the timer stops",
    ),
    Rule(
        "KA-S022",
        "block",
        "writing environment variables (os.environ[...] =, os.putenv)",
        "environment changes alter the evaluator and the libraries it relies on",
    ),
    Rule(
        "KA-S023",
        "block",
        "reserved source paths (definition.json, eval_driver.py, "
        "sitecustomize.py, kernelarc/, torch/, ...)",
        "such files overwrite the staged problem or shadow the evaluator's imports",
    ),
    Rule(
        "KA-S030",
        "flag",
        "functools cache / lru_cache on a helper",
        "fine for per-shape launch configs; suspicious if it returns tensors",
    ),
    Rule(
        "KA-S031",
        "flag",
        "data_ptr()",
        "legitimate for alignment checks, but also the key of output caches",
    ),
    Rule(
        "KA-S032",
        "flag",
        "global statement in a function",
        "state carried across calls can replay outputs",
    ),
    Rule(
        "KA-S033",
        "flag",
        "time module, weakref, reading os.environ",
        "a kernel has little need for clocks, weak references or the environment",
    ),
    Rule(
        "KA-S034",
        "flag",
        "global torch settings (torch.backends.*, "
        "set_float32_matmul_precision, dynamo/inductor config)",
        "they also change the reference's numerics and speed in the same process",
    ),
    Rule(
        "KA-S035",
        "flag",
        "a Python source that does not parse",
        "AST rules are skipped for it (token rules still apply); it will fail to import",
    ),
)
"""The catalogue, in id order (blocking rules first)."""

RULES_BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}
"""Rule id to rule."""


def scan_solution(solution: Solution) -> list[StaticFinding]:
    """Every rule match over a solution's sources (Python sources fully, all source paths).

    Returns findings ordered by (path, line, rule); each (rule, path, line) appears once.
    """
    entry_file, _, entry_symbol = solution.spec.entry_point.partition("::")
    matches: list[tuple[str, Match]] = [("", m) for m in scan_source_paths(solution.sources)]
    for source in solution.sources:
        if not source.path.endswith(".py"):
            continue
        entry = entry_symbol if source.path == entry_file else None
        matches.extend((source.path, m) for m in scan_python_source(source.content, entry))
    findings: dict[tuple[str, str, int], StaticFinding] = {}
    for path, match in matches:
        rule = RULES_BY_ID[match.rule]
        where = match.path or path
        key = (rule.id, where, match.line)
        if key not in findings:
            findings[key] = StaticFinding(
                rule=rule.id,
                severity=rule.severity,
                path=where,
                line=match.line,
                message=f"{match.detail}: {rule.rationale}",
            )
    return sorted(findings.values(), key=lambda f: (f.path, f.line, f.rule))


def blocking(findings: list[StaticFinding]) -> list[StaticFinding]:
    """The findings that reject a proposal before evaluation."""
    return [f for f in findings if f.severity == "block"]
