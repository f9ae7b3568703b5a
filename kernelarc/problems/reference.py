"""The definition's own reference as a solution, and the test for "this solution is the reference".

Place in the flow: `kernelarc eval PROBLEM --reference` evaluates `reference_solution(...)` to
check a new problem dir in seconds (as the official tools do); the campaign summary and the
export use `is_reference` so the unchanged reference (the compiler agent's eager baseline) is
never presented as a kernel the campaign found.
"""

from kernelarc.schema import BuildSpec, Definition, Language, Solution, SourceFile, TargetHardware

REFERENCE_FILE = "reference.py"


def reference_solution(definition: Definition) -> Solution:
    """The reference `run` as a return-style PyTorch solution of `definition`."""
    return Solution(
        name=f"{definition.name}-reference",
        definition=definition.name,
        author="reference",
        spec=BuildSpec(
            languages=[Language.PYTORCH],
            target_hardware=[TargetHardware.LOCAL],
            entry_point=f"{REFERENCE_FILE}::run",
            destination_passing_style=False,
        ),
        sources=[SourceFile(path=REFERENCE_FILE, content=definition.reference)],
        description="the definition's reference implementation, unchanged",
    )


def is_reference(solution: Solution, definition: Definition) -> bool:
    """True when the solution is the reference as-is: one source whose code is the reference's."""
    if len(solution.sources) != 1:
        return False
    return solution.sources[0].content.strip() == definition.reference.strip()
