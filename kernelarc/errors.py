"""Infrastructure errors. Candidate outcomes are statuses (schema.trace.EvalStatus), never these."""


class KernelarcError(Exception):
    """Base class of every error KernelArc raises on purpose."""


class ConfigError(KernelarcError):
    """A config value or input file is wrong; the message names the file, field and fix."""


class ProblemFormatError(ConfigError):
    """A SOL-ExecBench file (definition, workload, solution) does not validate."""


class SandboxError(KernelarcError):
    """The sandbox itself failed (not the candidate): it could not start or broke its protocol."""


class RunnerProtocolError(SandboxError):
    """The in-sandbox runner produced no valid result file."""


class LLMError(KernelarcError):
    """An LLM endpoint (or a replayed transcript) could not give a reply; the message says why."""


class TrackingError(KernelarcError):
    """The tracking backend failed."""
