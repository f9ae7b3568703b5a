"""Build the chat messages of an LLM agent from its `AgentContext` (pure: no I/O but templates).

Place in the flow: `LLMAgent.propose` calls `build_messages(ctx, ...)`; a reply that cannot be
used gets `reask_message(error)` appended. The user prompt shows only what the context holds:
the problem, the target, the agent's incumbent and recent attempts (statuses, errors, guard
findings), and, when the coordination switches put them in the context, the shared conclusions,
the peers' snapshots and a drafting order. Long sources and logs are cut with a marker, and the
whole prompt is kept under `MAX_PROMPT_CHARS` by shrinking the least important sections first.
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass

from kernelarc.agents.context import AgentContext, DraftOrder, PeerSnapshot
from kernelarc.agents.llm.prompt_templates import render
from kernelarc.agents.llm.strategy_names import STRATEGIES
from kernelarc.schema import Attempt, EvalStatus, ScalarInput, Solution, Trace, Workload
from kernelarc.schema.coordination import ChatMessage, Conclusion

MAX_PROMPT_CHARS = 60_000
"""Upper bound of the user prompt (about 15k tokens)."""
MAX_SOURCE_CHARS = 8_000
"""Per source file shown (incumbent, last failure, draft base, reference)."""
MAX_PEER_SOURCE_CHARS = 4_000
"""Per source file of a peer's incumbent."""
MAX_LOG_CHARS = 1_500
"""Per error log or runner stderr tail."""
RECENT_ATTEMPTS = 6
"""Own attempts listed in detail (the most recent ones)."""
MAX_WORKLOADS = 12
"""Workloads listed; the rest are counted."""
_MIN_SECTION_CHARS = 400


def truncate(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters: head and tail kept, a marker in between."""
    if len(text) <= limit:
        return text
    room = max(limit - len(_cut_marker(len(text))), 0)
    head = room * 2 // 3
    tail = room - head
    marker = _cut_marker(len(text) - head - tail)
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


def _cut_marker(cut: int) -> str:
    return f"\n[... {cut} characters cut ...]\n"


def system_prompt(agent: str, strategy: str) -> str:
    """Role, strategy, calling convention, rejected tricks and the reply format."""
    return render(
        "system",
        agent=agent,
        strategy_title=STRATEGIES[strategy],
        strategy_text=render(f"strategies/{strategy}"),
    )


def build_messages(ctx: AgentContext, *, agent: str, strategy: str) -> list[ChatMessage]:
    """The system and user messages of a fresh proposal request."""
    return [
        ChatMessage(role="system", content=system_prompt(agent, strategy)),
        ChatMessage(role="user", content=user_prompt(ctx)),
    ]


def reask_message(error: str) -> ChatMessage:
    """The follow-up after an unusable reply; it quotes the parse error."""
    return ChatMessage(role="user", content=render("reask", error=truncate(error, MAX_LOG_CHARS)))


def own_incumbent(ctx: AgentContext) -> Attempt | None:
    """The context's incumbent, else the agent's best passing attempt in it."""
    if ctx.incumbent is not None:
        return ctx.incumbent
    passed = [a for a in ctx.attempts if a.status == EvalStatus.PASSED and a.speedup is not None]
    return max(passed, key=lambda a: a.speedup or 0.0, default=None)


@dataclass
class _Section:
    """One optional part of the user prompt; lower `priority` is shrunk first."""

    text: str
    priority: int


def user_prompt(ctx: AgentContext) -> str:
    """The problem, the target, the agent's history and whatever coordination put in `ctx`."""
    definition = ctx.problem.definition
    shown = definition.model_dump(mode="json", exclude={"reference"}, exclude_none=True)
    incumbent = own_incumbent(ctx)
    sections = [
        s
        for s in (
            _Section(_incumbent_section(incumbent), 5),
            _Section(_attempts_section(ctx.attempts, incumbent), 4),
            _Section(_draft_section(ctx.draft), 3),
            _Section(_conclusions_section(ctx.conclusions), 2),
            _Section(_peers_section(ctx.peers), 1),
        )
        if s.text
    ]
    fixed = {
        "problem": definition.name,
        "definition": "```json\n" + json.dumps(shown, indent=2) + "\n```",
        "reference": truncate(definition.reference.rstrip(), MAX_SOURCE_CHARS),
        "workloads": _workloads(ctx.problem.workloads),
        "target": _target(ctx),
        "task": _task(ctx),
    }
    budget = MAX_PROMPT_CHARS - len(render("user", sections="", **fixed))
    _fit(sections, budget)
    return render("user", sections="\n\n".join(s.text for s in sections), **fixed)


def _fit(sections: list[_Section], budget: int) -> None:
    """Shrink sections, least important first, until their total fits `budget`."""
    for section in sorted(sections, key=lambda s: s.priority):
        excess = sum(len(s.text) + 2 for s in sections) - budget
        if excess <= 0:
            return
        keep = max(len(section.text) - excess, _MIN_SECTION_CHARS)
        section.text = truncate(section.text, keep)


def _workloads(workloads: Iterable[Workload]) -> str:
    items = list(workloads)
    lines = []
    for workload in items[:MAX_WORKLOADS]:
        axes = ", ".join(f"{k}={v}" for k, v in workload.axes.items()) or "no variable axes"
        scalars = [
            f"{name}={spec.value}"
            for name, spec in workload.inputs.items()
            if isinstance(spec, ScalarInput)
        ]
        tol = workload.tolerance
        line = (
            f"- `{workload.uuid}`: {axes}; tolerance atol {tol.max_atol}, rtol {tol.max_rtol}, "
            f"matched ratio {tol.required_matched_ratio}"
        )
        if scalars:
            line += "; scalars " + ", ".join(scalars)
        lines.append(line)
    if len(items) > MAX_WORKLOADS:
        lines.append(f"- ... and {len(items) - MAX_WORKLOADS} more")
    return "\n".join(lines)


def _target(ctx: AgentContext) -> str:
    if ctx.device == "cpu":
        return (
            "CPU. Candidates run on the CPU (`triton` kernels under Triton's interpreter); "
            "timings are only a smoke signal. Use `pytorch` or `triton`."
        )
    gpu = ctx.gpu or next(
        (
            t.evaluation.environment.hardware
            for a in ctx.attempts
            for t in a.traces
            if t.evaluation is not None
        ),
        "",
    )
    return f"CUDA GPU: {gpu or 'an NVIDIA GPU (name not known yet)'}."


def _task(ctx: AgentContext) -> str:
    if ctx.draft is not None:
        name = "task_draft_global_best" if ctx.draft.base is not None else "task_draft_reference"
        return render(name, reason=ctx.draft.reason)
    if not ctx.attempts:
        return render("task_first")
    return render("task_improve", seen=len(ctx.seen_ids))


def _sources(solution: Solution, limit: int) -> str:
    spec = solution.spec
    head = (
        f"languages {[str(lang) for lang in spec.languages]}, entry point `{spec.entry_point}`, "
        f"destination_passing_style {str(spec.destination_passing_style).lower()}"
    )
    blocks = [
        f"```{_fence_language(source.path)} path={source.path}\n"
        f"{truncate(source.content.rstrip(), limit)}\n```"
        for source in solution.sources
    ]
    return "\n".join([head, *blocks])


def _fence_language(path: str) -> str:
    if path.endswith(".py"):
        return "python"
    if path.endswith((".cu", ".cuh")):
        return "cuda"
    return "cpp"


def _speedup(attempt: Attempt) -> str:
    return f"{attempt.speedup:.3f}x" if attempt.speedup is not None else "-"


def _trace_lines(traces: Iterable[Trace]) -> list[str]:
    lines = []
    for trace in traces:
        evaluation = trace.evaluation
        if evaluation is None:
            continue
        line = f"- `{trace.workload.uuid}`: {evaluation.status}"
        perf = evaluation.performance
        if perf is not None:
            line += (
                f", {perf.latency_ms:.4f} ms vs reference {perf.reference_latency_ms:.4f} ms "
                f"({perf.speedup_factor:.2f}x)"
            )
        corr = evaluation.correctness
        if corr is not None and evaluation.status != EvalStatus.PASSED:
            line += f", max abs error {corr.max_absolute_error:.3g}"
        lines.append(line)
    return lines


def _incumbent_section(incumbent: Attempt | None) -> str:
    if incumbent is None:
        return ""
    lines = [
        "## Your incumbent (your best passing attempt)",
        f"Attempt {incumbent.index} ({incumbent.proposal.id}): speedup {_speedup(incumbent)}, "
        f"verdict {incumbent.verdict}. Rationale: {incumbent.proposal.rationale or '-'}",
        "Per workload:",
        *_trace_lines(incumbent.traces),
        _sources(incumbent.proposal.solution, MAX_SOURCE_CHARS),
    ]
    return "\n".join(lines)


def _failure_text(attempt: Attempt) -> str:
    """What went wrong, from the most specific source: trace log, infra error, stderr tail."""
    for trace in attempt.traces:
        evaluation = trace.evaluation
        log = evaluation.log.strip() if evaluation is not None else ""
        if evaluation is not None and evaluation.status != EvalStatus.PASSED and log:
            return f"workload `{trace.workload.uuid}`: {log}"
    if attempt.error:
        return attempt.error
    return attempt.stderr_tail.strip()


def _guard_lines(attempt: Attempt) -> list[str]:
    guard = attempt.guard
    if guard is None:
        return []
    lines = [
        f"- guard {f.severity} {f.rule} in {f.path}:{f.line}: {f.message}" for f in guard.findings
    ]
    if guard.reason:
        lines.append(f"- guard decision: {guard.reason}")
    return lines


def _attempts_section(attempts: tuple[Attempt, ...], incumbent: Attempt | None) -> str:
    if not attempts:
        return ""
    recent = attempts[-RECENT_ATTEMPTS:]
    lines = [f"## Your recent attempts ({len(recent)} of {len(attempts)}, oldest first)"]
    for attempt in recent:
        lines.append(
            f"### Attempt {attempt.index} ({attempt.proposal.id}): {attempt.status}, "
            f"speedup {_speedup(attempt)}, verdict {attempt.verdict}"
        )
        lines.append(f"Rationale: {attempt.proposal.rationale or '-'}")
        lines.extend(_guard_lines(attempt))
        if attempt.status != EvalStatus.PASSED:
            failure = _failure_text(attempt)
            if failure:
                lines.append("Error:\n```text\n" + truncate(failure, MAX_LOG_CHARS) + "\n```")
    last = attempts[-1]
    if last.status != EvalStatus.PASSED and (incumbent is None or last.index != incumbent.index):
        lines.append(f"Code of attempt {last.index} (the last one, which failed):")
        lines.append(_sources(last.proposal.solution, MAX_SOURCE_CHARS))
    return "\n".join(lines)


def _conclusions_section(conclusions: tuple[Conclusion, ...]) -> str:
    if not conclusions:
        return ""
    lines = ["## Shared conclusions (findings of the team, with their evidence)"]
    for conclusion in conclusions:
        evidence = "; ".join(
            f"attempt {e.attempt_index} {e.metric}"
            + (f" {e.value:.3g}" if e.value is not None else "")
            + (f" vs {e.baseline:.3g}" if e.baseline is not None else "")
            for e in conclusion.evidence
        )
        lines.append(
            f"- [{conclusion.id}] {conclusion.agent} ({conclusion.strategy}, confidence "
            f"{conclusion.confidence:.2f}): {conclusion.claim} Evidence: {evidence}."
        )
    return "\n".join(lines)


def _peers_section(peers: tuple[PeerSnapshot, ...]) -> str:
    if not peers:
        return ""
    lines = ["## Your peers (read-only snapshots)"]
    for peer in peers:
        best = f"{peer.best_speedup:.3f}x" if peer.best_speedup is not None else "none yet"
        trend = ", ".join(f"{s:.2f}x" if s is not None else "fail" for s in peer.recent_speedups)
        lines.append(
            f"### {peer.agent} ({peer.strategy}): best speedup {best}, "
            f"{peer.attempts} attempts, recent [{trend or '-'}]"
        )
        if peer.incumbent is not None:
            lines.append(
                f"Its incumbent, attempt {peer.incumbent.index} ({peer.incumbent.proposal.id}):"
            )
            lines.append(_sources(peer.incumbent.proposal.solution, MAX_PEER_SOURCE_CHARS))
    return "\n".join(lines)


def _draft_section(draft: DraftOrder | None) -> str:
    if draft is None or draft.base is None:
        return ""
    base = draft.base
    return "\n".join(
        [
            f"## Draft base: the team's best, attempt {base.index} ({base.proposal.id}) by "
            f"{base.proposal.agent}, speedup {_speedup(base)}",
            _sources(base.proposal.solution, MAX_SOURCE_CHARS),
        ]
    )


def visible_attempts(ctx: AgentContext) -> dict[int, Attempt]:
    """Every attempt the prompt shows, by index: evidence a conclusion may cite."""
    shown: dict[int, Attempt] = {a.index: a for a in ctx.attempts}
    extra = [ctx.incumbent, ctx.draft.base if ctx.draft else None]
    extra += [p.incumbent for p in ctx.peers]
    for attempt in extra:
        if attempt is not None:
            shown[attempt.index] = attempt
    return shown
