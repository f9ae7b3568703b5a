"""The offline strategy agents: one per optimisation strategy of the team.

Place in the flow: `make_team` builds these for the offline kinds of `agents.team`. Four search
the fused Triton template of the problem's family (triton/template_knobs.py), each over the
knobs its strategy owns; two rewrite the reference with library or precision settings
(torch_variants.py, problems with a matmul only); the seventh, compiler-driven, is
`CompilerAgent` (compiler_agent.py).

| kind | owns |
| --- | --- |
| `tiling` | tile sizes: rows per program (ROWS), BLOCK_M/N/K, heads per program (BLOCK_HEADS) |
| `memory` | contiguous chunk widths (BLOCK_H, BLOCK_D), vector width (VEC), L2 swizzle (GROUP_M) |
| `fusion` | fusion knobs (the persistent grid, PERSISTENT); with none, all knobs of the kernel |
| `pipelining` | num_warps and num_stages (occupancy, software pipelining) |
| `precision` | compute dtype under autocast, float32 matmul precision |
| `library` | GEMM library path (addmm, cuBLASLt epilogue), BLAS backend, TF32 |

Which knob a strategy owns is decided by name in `triton.template_knobs.KNOB_OWNERS`.

Triton candidates carry a header that names the setting, not the agent, so two agents that reach
the same setting produce the same proposal id and it is evaluated once.
"""

from typing import Any

from kernelarc.agents.knob_search import Knobs, KnobSpace
from kernelarc.agents.proposals import build_proposal
from kernelarc.agents.strategy.knob_agent import KnobStrategyAgent
from kernelarc.agents.strategy.torch_variants import render_torch, torch_space
from kernelarc.agents.triton.generated_space import FAMILY as GENERATED_FAMILY
from kernelarc.agents.triton.generated_space import (
    GeneratedContext,
    generated_space,
    render_generated,
)
from kernelarc.agents.triton.template_agent import knob_tag
from kernelarc.agents.triton.template_knobs import render_triton, triton_space
from kernelarc.problems.files import Problem
from kernelarc.reference_ops import MATMUL_NAMES, uses_operations
from kernelarc.schema import DType, Language, Proposal


class TritonStrategyAgent(KnobStrategyAgent):
    """A strategy that searches its knobs of a fused Triton kernel for the problem: the
    hand-written template of the problem's family when one fits, else the kernels the generator
    makes from the traced reference (`triton/generated_space.py`)."""

    def space_for(self, problem: Problem, device: str) -> tuple[KnobSpace, Any] | str:
        """The template's knob space, else the generated kernels' (every strategy sees all
        knobs, searches its own)."""
        found = triton_space(problem, device)
        if not isinstance(found, str):
            return found
        generated = generated_space(problem, device)
        if isinstance(generated, str):
            return f"{found}; {generated}"
        return generated

    def render(self, problem: Problem, extra: Any, space: KnobSpace, setting: Knobs) -> Proposal:
        """The fused kernel at one setting."""
        if isinstance(extra, GeneratedContext):
            return self._render_generated(problem, extra, space, setting)
        family = space.family.removeprefix("triton/")
        ints = {name: int(value) for name, value in setting.items()}
        tag = knob_tag(ints)
        header = f"KernelArc fused Triton {family} kernel for {problem.name}: {tag}."
        knobs: dict[str, str | int | float | bool] = {"space": space.family, "template": family}
        knobs.update(ints)
        return build_proposal(
            problem=problem.name,
            agent=self.name,
            strategy=self.strategy,
            language=Language.TRITON,
            source=render_triton(extra, setting, header),
            tag=f"{family}-{tag}",
            knobs=knobs,
            rationale=f"{self.strategy}: fused Triton {family} kernel, knobs {tag}",
        )

    def _render_generated(
        self, problem: Problem, context: GeneratedContext, space: KnobSpace, setting: Knobs
    ) -> Proposal:
        ints = {name: int(value) for name, value in setting.items()}
        tag = knob_tag(ints)
        summary = context.probe.summary()
        header = (
            f"KernelArc generated Triton kernels for {problem.name} (from the traced reference): "
            f"{tag}.\n\n{summary}."
        )
        generated = render_generated(context, setting, header)
        knobs: dict[str, str | int | float | bool] = {"space": space.family, "template": "gen"}
        knobs.update(ints)
        return build_proposal(
            problem=problem.name,
            agent=self.name,
            strategy=self.strategy,
            language=Language.TRITON,
            source=generated.source,
            tag=f"gen-{tag}",
            knobs=knobs,
            rationale=f"{self.strategy}: generated Triton ({summary}), knobs {tag}",
        )


class TilingAgent(TritonStrategyAgent):
    """Tiling and blocking: the tile each program computes."""

    strategy = "tiling"


class MemoryAgent(TritonStrategyAgent):
    """Memory access and vectorisation: contiguous widths and L2-friendly program order."""

    strategy = "memory"


class PipeliningAgent(TritonStrategyAgent):
    """Pipelining and occupancy: warps per program and software-pipeline stages."""

    strategy = "pipelining"


class FusionAgent(TritonStrategyAgent):
    """Fusion: brings the fused kernels in. It searches the generated kernels of the traced
    reference (whole-graph fusion) even where a hand-written template fits, so both families
    compete; its knobs are the fusion knobs, or every knob with a choice when there is none."""

    strategy = "fusion"

    def space_for(self, problem: Problem, device: str) -> tuple[KnobSpace, Any] | str:
        """The generated kernels' space, else the template's."""
        generated = generated_space(problem, device)
        if not isinstance(generated, str):
            return generated
        found = triton_space(problem, device)
        return f"{generated}; {found}" if isinstance(found, str) else found

    def owned(self, space: KnobSpace) -> tuple[str, ...]:
        """Fusion knobs (in a generated space also how the fused GEMM multiplies, its dot
        precision), else all knobs with a choice."""
        own = space.owned_by(self.strategy)
        if space.family == GENERATED_FAMILY:
            own += space.owned_by("precision")
        return own or tuple(name for name, values in space.options.items() if len(values) > 1)


class TorchStrategyAgent(KnobStrategyAgent):
    """A strategy that rewrites the reference with library or precision settings."""

    def space_for(self, problem: Problem, device: str) -> tuple[KnobSpace, Any] | str:
        """The variant space (problems with a matmul only)."""
        found = torch_space(problem, device)
        if isinstance(found, str):
            return found
        space, _ = found
        if not self.owned(space):
            return f"no {self.strategy} setting has a choice on {device} for this problem"
        return found

    def render(self, problem: Problem, extra: Any, space: KnobSpace, setting: Knobs) -> Proposal:
        """The reference with the setting applied."""
        changed = {k: v for k, v in setting.items() if v != space.default[k]}
        tag = "-".join(f"{k}-{v}" for k, v in sorted(changed.items())).lower()
        note = ", ".join(f"{k}={v}" for k, v in sorted(changed.items()))
        knobs: dict[str, str | int | float | bool] = {"space": space.family}
        knobs.update(setting)
        return build_proposal(
            problem=problem.name,
            agent=self.name,
            strategy=self.strategy,
            language=Language.PYTORCH,
            source=render_torch(problem.definition, extra, setting, note),
            tag=tag,
            knobs=knobs,
            rationale=f"{self.strategy}: the reference with {note}",
        )


class PrecisionAgent(TorchStrategyAgent):
    """Precision and numerics: lower compute dtypes and matmul precision where tolerances allow."""

    strategy = "precision"

    def leads(self, problem: Problem, device: str) -> bool:
        """On CUDA, a reference that multiplies float32 matrices: torch runs those at full
        float32 by default, and a bf16 or TF32 rewrite is often several times faster (4.3x on
        kb_l1_15, 3.1x on kb_l2_29, 1.5x on kb_l2_68, H100 suite runs 11 and 15). In 40-60 s
        campaigns the precision agent, fifth in the team, was often never judged (kb_l1_2, run
        14), so here it goes first. (Convolutions are left out: cuDNN already uses TF32.)"""
        definition = problem.definition
        return (
            device == "cuda"
            and uses_operations(definition.reference, MATMUL_NAMES)
            and any(spec.dtype == DType.FLOAT32 for spec in definition.inputs.values())
        )


class LibraryAgent(TorchStrategyAgent):
    """Library configuration: the GEMM's library path and BLAS backend, TF32."""

    strategy = "library"

    def space_for(self, problem: Problem, device: str) -> tuple[KnobSpace, Any] | str:
        """As the precision agent's, for references with a matrix product only: a convolution
        alone runs in cuDNN, which none of these settings changes (cuDNN's TF32 is on by
        default), so each variant would be the reference again (H100 suite run 16: such a
        variant took the first timed slot of two 35 s conv campaigns)."""
        found = super().space_for(problem, device)
        if not isinstance(found, str) and not uses_operations(
            problem.definition.reference, MATMUL_NAMES
        ):
            return "the reference has no matrix product: library settings change nothing"
        return found
