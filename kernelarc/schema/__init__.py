"""Wire models: the SOL-ExecBench formats and KernelArc's records."""

from kernelarc.schema.definition import AxisConst, AxisExpr, AxisVar, Definition, DType, TensorSpec
from kernelarc.schema.records import (
    OFFICIAL_SEED,
    Attempt,
    EvalRequest,
    EvalResult,
    Proposal,
    TimingConfig,
    Verdict,
    proposal_id_for,
    utc_now,
)
from kernelarc.schema.solution import (
    BuildSpec,
    CompileOptions,
    Language,
    Solution,
    SourceFile,
    TargetHardware,
)
from kernelarc.schema.trace import (
    Correctness,
    Environment,
    EvalStatus,
    Evaluation,
    Performance,
    Trace,
)
from kernelarc.schema.workload import (
    CustomInput,
    RandomInput,
    SafetensorsInput,
    ScalarInput,
    ToleranceSpec,
    Workload,
)

__all__ = [
    "OFFICIAL_SEED",
    "Attempt",
    "AxisConst",
    "AxisExpr",
    "AxisVar",
    "BuildSpec",
    "CompileOptions",
    "Correctness",
    "CustomInput",
    "DType",
    "Definition",
    "Environment",
    "EvalRequest",
    "EvalResult",
    "EvalStatus",
    "Evaluation",
    "Language",
    "Performance",
    "Proposal",
    "RandomInput",
    "SafetensorsInput",
    "ScalarInput",
    "Solution",
    "SourceFile",
    "TargetHardware",
    "TensorSpec",
    "TimingConfig",
    "ToleranceSpec",
    "Trace",
    "Verdict",
    "Workload",
    "proposal_id_for",
    "utc_now",
]
