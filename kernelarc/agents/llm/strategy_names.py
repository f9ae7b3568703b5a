"""The optimisation strategies an LLM agent can own, and the spellings that select them.

Place in the flow: `make_llm_agent` resolves `AgentSpec.strategy` here; the prompt builder loads
`prompts/strategies/<name>.md` for the canonical name.
"""

from kernelarc.errors import ConfigError

STRATEGIES: dict[str, str] = {
    "tiling": "tiling and blocking",
    "memory": "memory access and vectorization",
    "fusion": "fusion",
    "pipelining": "pipelining and occupancy",
    "precision": "precision and numerics",
    "library": "library configuration (cuBLASLt, CUTLASS, cuDNN)",
    "compiler": "compiler-driven optimisation",
}
"""Canonical strategy name -> what it covers (each has prompts/strategies/<name>.md)."""

_ALIASES: dict[str, str] = {
    "blocking": "tiling",
    "tiling_blocking": "tiling",
    "memory_access": "memory",
    "vectorization": "memory",
    "memory_vectorization": "memory",
    "occupancy": "pipelining",
    "pipelining_occupancy": "pipelining",
    "numerics": "precision",
    "precision_numerics": "precision",
    "library_config": "library",
    "library_configuration": "library",
    "cublaslt": "library",
    "cutlass": "library",
    "compiler_driven": "compiler",
}


def resolve_strategy(name: str) -> str:
    """The canonical name of a strategy (`Memory-Access` -> `memory`).

    Raises:
        ConfigError: the name is empty or unknown; the message lists the valid names.
    """
    key = name.strip().lower().replace("-", "_").replace(" ", "_").replace("&", "")
    key = "_".join(part for part in key.split("_") if part)
    canonical = key if key in STRATEGIES else _ALIASES.get(key)
    if canonical is None:
        msg = (
            f"unknown LLM agent strategy {name!r} in agents.team; use one of "
            f"{sorted(STRATEGIES)} (each is described in docs/llm.md)"
        )
        raise ConfigError(msg)
    return canonical
