"""The compiler agent: the reference itself, then torch.compile variants of it.

Place in the flow: a member of the team built by `make_team`; the campaign loop calls `propose`
until it returns None. It works for any definition because it only rewraps the reference source:
the eager reference as-is (the baseline every other candidate is compared with) and the
reference wrapped in `torch.compile` with different modes. The order is fixed (cheap compiles
first; a cold CPU compile costs ~10-30 s per fresh process because Inductor builds C++), except
that on CUDA compile default comes before the eager reference (`variants_for`), and variants
the shared conclusions found failing or slower are tried last. After a compiled
variant is judged, `conclude` compares it with the eager reference it measured
(`variant compile-default over eager: +25% on rmsnorm (attempts 4 vs 0)`).

A compiled variant fixes Inductor's options before its first call (`PINNED_OPTIONS`): the
mode's options (`torch._inductor.list_mode_options`, passed as `options=` since torch.compile
takes a mode or options, not both) plus `compile_threads=1`, `autotune_in_subproc=False` and
`autotune_local_cache=False` (see PINNED_OPTIONS).
With several compile threads Inductor starts a compile worker pool whose reader thread answers
a readiness job asynchronously and whose idle timer thread starts when that answer arrives,
which can be after the first call, during timing: both thread-injection checks (KernelArc's
and the official evaluator's, which compares the thread count after the first call with the
count after timing) then report a reward hack, on some workloads and not others. With one
compile thread everything is compiled in the calling thread, during the first call of each
shape, and no thread starts afterwards (docs/runner.md, "Compiled candidates and the thread
checks").
"""

import logging
from dataclasses import dataclass

from kernelarc.agents.context import AgentContext
from kernelarc.agents.knob_findings import compare_draft, failure_draft, read_findings
from kernelarc.agents.proposals import build_proposal
from kernelarc.schema import Attempt, Definition, EvalStatus, Language, Proposal
from kernelarc.schema.coordination import ConclusionDraft

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompileVariant:
    """One torch.compile setting (or none: the eager reference)."""

    tag: str
    """Short name used in the solution name and knobs."""
    compiled: bool = True
    """False: the reference as-is."""
    mode: str | None = None
    """torch.compile mode (None = default)."""
    dynamic: bool | None = None
    """torch.compile dynamic (None = automatic)."""
    fullgraph: bool = False
    """torch.compile fullgraph."""
    cuda_only: bool = False
    """Offered only when the device is CUDA (CUDA graphs)."""

    def knobs(self) -> dict[str, str | int | float | bool]:
        """The variant as proposal knobs."""
        if not self.compiled:
            return {"variant": self.tag, "compiled": False}
        return {
            "variant": self.tag,
            "compiled": True,
            "mode": self.mode or "default",
            "dynamic": "auto" if self.dynamic is None else self.dynamic,
            "fullgraph": self.fullgraph,
        }

    def call_args(self) -> str:
        """Keyword arguments of the torch.compile call, as source text."""
        args = []
        if self.mode is not None:
            args.append(f"mode={self.mode!r}")
        if self.dynamic is not None:
            args.append(f"dynamic={self.dynamic}")
        if self.fullgraph:
            args.append("fullgraph=True")
        return ", ".join(args)


# The eager anchor, then torch.compile's default right away (on CUDA before it: `variants_for`):
# it is the baseline every generated
# kernel is held to (the suite reports x compile default), it compiles in seconds and rarely
# fails, and with the compiler last in the team's turn order a variant ranked fourth was first
# judged in the campaign's fourth round: on the H200 (2026-12-04) 100 s suite campaigns never
# reached it, and exported a kernel slower than compile default that the campaign never measured.
# Then the stronger but slower variants (a cold compile costs 20-35 s per candidate on a CPU
# host; max-autotune autotunes for tens of seconds on a GPU).
COMPILE_DEFAULT = "compile-default"
VARIANTS: tuple[CompileVariant, ...] = (
    CompileVariant("eager", compiled=False),
    CompileVariant(COMPILE_DEFAULT),
    CompileVariant("compile-max-autotune-no-cudagraphs", mode="max-autotune-no-cudagraphs"),
    CompileVariant("compile-static-fullgraph", dynamic=False, fullgraph=True),
    CompileVariant("compile-dynamic", dynamic=True),
    CompileVariant("compile-max-autotune", mode="max-autotune", cuda_only=True),
    CompileVariant("compile-reduce-overhead", mode="reduce-overhead", cuda_only=True),
)


#: Inductor options every compiled variant sets, whatever its mode (module docstring).
PINNED_OPTIONS: dict[str, int | bool] = {
    "compile_threads": 1,
    "autotune_in_subproc": False,
    "autotune_local_cache": False,
}
"""`autotune_local_cache=False`: Inductor writes a reduction's chosen config next to the kernel
file whose absolute path its FX graph cache entry keeps (the bundled autotuner is pickled). The
host hands a candidate's JIT caches to its later runs (screen, then timed run and guard runs),
each in a new runner dir, so on a cache hit that path names the first run's dir, gone or
read-only: `OSError: Read-only file system` in `autotune_cache._put`, a RUNTIME_ERROR of
the candidate's timed run (seen on the H200, 2026-12-04). Without the local autotune cache the
kernels still come from the restored caches; the config is chosen again at the first call."""


def render_compiled_source(definition: Definition, variant: CompileVariant) -> str:
    """The reference followed by a `run` with the same parameters that calls its compiled form,
    with Inductor's options fixed before the first call (`PINNED_OPTIONS`)."""
    if not variant.compiled:
        return definition.reference
    params = ", ".join(definition.inputs)
    mode_options = "{}"
    if variant.mode is not None:
        mode_options = (
            f"dict(_kernelarc_inductor.list_mode_options({variant.mode!r}, {variant.dynamic}))"
        )
    args = [f"dynamic={variant.dynamic}"] if variant.dynamic is not None else []
    args += ["fullgraph=True"] if variant.fullgraph else []
    args.append("options=_compile_options")
    return (
        f"{definition.reference.rstrip()}\n\n\n"
        f"# KernelArc compiler agent: the reference `run` above under torch.compile("
        f"{variant.call_args()}).\n"
        "# Inductor compiles in the calling thread (compile_threads=1) and autotunes in this\n"
        "# process: no compile worker pool whose threads start after the first call; no local\n"
        "# autotune cache, whose path a restored FX graph cache entry would name wrongly.\n"
        "import torch as _kernelarc_torch\n"
        "import torch._inductor as _kernelarc_inductor\n\n"
        "_reference_run = run\n"
        f"_compile_options = {mode_options}\n"
        f"_compile_options.update({PINNED_OPTIONS!r})\n"
        f"_compiled_run = _kernelarc_torch.compile(_reference_run, {', '.join(args)})\n\n\n"
        f"def run({params}):\n"
        f"    return _compiled_run({params})\n"
    )


class CompilerAgent:
    """Proposes the eager reference, then torch.compile variants of it, in a fixed order."""

    strategy = "compiler"
    min_effect = 0.05
    """Smallest relative speedup change worth a conclusion."""

    def __init__(self, name: str = "compiler", seed: int = 0) -> None:
        self.name = name
        self.seed = seed
        self.model: str | None = None
        self._issued: set[str] = set()

    def variants_for(self, device: str) -> list[CompileVariant]:
        """The variants offered on a device, in proposal order: on CUDA compile default first.

        Why: the compiler's first candidate is the only one of its that a short campaign is
        sure to judge (the team's turn order serves every agent's round n before its round
        n + 1). On the H100 suite run of 2026-12-06 (issue #15, 42-48 s campaigns) the eager
        anchor was judged and compile default never was on 3 of 7 problems, so each exported
        a kernel slower than compile default (0.84-0.995x) that the campaign never measured.
        On a GPU compile default compiles in seconds and is the bar a kernel must beat; the
        eager reference follows (the safe fallback if compiling fails). On the CPU, where a
        cold Inductor compile costs 10-30 s, the eager reference stays first."""
        offered = [v for v in VARIANTS if device == "cuda" or not v.cuda_only]
        if device == "cuda":
            offered.sort(key=lambda v: v.tag != COMPILE_DEFAULT)  # stable: the rest keep order
        return offered

    def propose(self, ctx: AgentContext) -> Proposal | None:
        """The first variant not yet proposed or evaluated, or None when all were."""
        skip = ctx.seen_ids | self._issued | {a.proposal.id for a in ctx.attempts}
        definition = ctx.problem.definition
        findings = read_findings(ctx.conclusions)
        # Stable sort: the device's order, with compiled variants found slower or failing
        # moved last (the eager baseline is never moved).
        variants = sorted(
            self.variants_for(ctx.device),
            key=lambda v: v.compiled and findings.rank("variant", v.tag) >= 2,
        )
        for variant in variants:
            rationale = (
                "the reference as-is (eager): the baseline any kernel must beat"
                if not variant.compiled
                else f"torch.compile({variant.call_args()}) of the reference"
            )
            proposal = build_proposal(
                problem=definition.name,
                agent=self.name,
                strategy=self.strategy,
                language=Language.PYTORCH,
                source=render_compiled_source(definition, variant),
                tag=variant.tag,
                knobs=variant.knobs(),
                rationale=rationale,
            )
            if proposal.id in skip:
                continue
            self._issued.add(proposal.id)
            return proposal
        logger.debug("%s: no new compile variant for %s", self.name, definition.name)
        return None

    def is_anchor(self, proposal: Proposal) -> bool:
        """The team's anchors (`agents.AnchoringAgent`): the eager reference and compile
        default, the bars every kernel is held to; they never wait for other agents."""
        return proposal.knobs.get("variant") in ("eager", COMPILE_DEFAULT)

    def conclude(self, attempt: Attempt, ctx: AgentContext) -> list[ConclusionDraft]:
        """A compiled variant against the eager reference this agent measured, if any; for the
        eager reference, every compiled variant judged before it (on CUDA compile default comes
        first, so its comparison waits for the eager reference)."""
        if attempt.proposal.knobs.get("compiled") is not True:
            earlier = [
                a
                for a in ctx.attempts
                if a.proposal.knobs.get("compiled") is True and a.index < attempt.index
            ]
            return [d for compiled in earlier for d in self._against(compiled, attempt, ctx)]
        eager = next((a for a in ctx.attempts if a.proposal.knobs.get("variant") == "eager"), None)
        return self._against(attempt, eager, ctx) if eager is not None else []

    def _against(
        self, attempt: Attempt, eager: Attempt, ctx: AgentContext
    ) -> list[ConclusionDraft]:
        """A compiled variant's attempt against the eager reference's."""
        if eager.status != EvalStatus.PASSED or eager.speedup is None:
            return []
        problem = ctx.problem.name
        if attempt.status in (EvalStatus.COMPILE_ERROR, EvalStatus.RUNTIME_ERROR):
            return [failure_draft("variant", attempt, problem)]
        if attempt.status != EvalStatus.PASSED or attempt.speedup is None:
            return []
        delta = attempt.speedup / eager.speedup - 1.0
        if abs(delta) < self.min_effect:
            return []
        faster, slower = (attempt, eager) if delta > 0 else (eager, attempt)
        return [compare_draft("variant", faster, slower, problem, 0.6)]
