"""The SOL-ExecBench `workload.jsonl` line model: axis bindings, input kinds and tolerances."""

from typing import Annotated, Literal

from pydantic import Field, model_validator

from kernelarc.schema.base import WireModel


class RandomInput(WireModel):
    """Generated from the dtype's random generator (the default for unlisted inputs)."""

    type: Literal["random"]
    """Discriminator."""


class ScalarInput(WireModel):
    """A Python scalar passed as-is."""

    type: Literal["scalar"]
    """Discriminator."""
    value: bool | int | float
    """The value."""


class SafetensorsInput(WireModel):
    """A tensor loaded from a safetensors file."""

    type: Literal["safetensors"]
    """Discriminator."""
    path: str = Field(min_length=1)
    """File path, resolved against the problem dir, then `$FLASHINFER_TRACE_DIR`."""
    tensor_key: str = Field(min_length=1)
    """Key of the tensor inside the file."""


class CustomInput(WireModel):
    """Produced by the definition's `custom_inputs_entrypoint`."""

    type: Literal["custom"]
    """Discriminator."""


InputSpec = Annotated[
    RandomInput | ScalarInput | SafetensorsInput | CustomInput, Field(discriminator="type")
]


class ToleranceSpec(WireModel):
    """Correctness tolerance of a workload (SOL-ExecBench defaults)."""

    max_atol: float = Field(default=1e-2, ge=0)
    """Absolute tolerance per element."""
    max_rtol: float = Field(default=1e-2, ge=0)
    """Relative tolerance per element."""
    required_matched_ratio: float = Field(default=0.99, ge=0, le=1)
    """Share of elements that must be within tolerance."""
    max_error_cap: float | None = Field(default=None, ge=0)
    """If set, a hard limit on the largest absolute error."""
    allow_negative_inf: bool = False
    """Accept positions where both outputs are -inf."""


class Workload(WireModel):
    """One concrete instance of a problem: var-axis sizes, input kinds and tolerance."""

    uuid: str = Field(min_length=1)
    """Workload id."""
    axes: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    """Sizes of the definition's var axes."""
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    """Input kinds by name; missing inputs are random."""
    tolerance: ToleranceSpec = Field(default_factory=ToleranceSpec)
    """Correctness tolerance."""

    @model_validator(mode="after")
    def _all_or_no_custom(self) -> "Workload":
        kinds = {spec.type for spec in self.inputs.values()}
        if "custom" in kinds and kinds != {"custom"}:
            msg = "a workload's inputs are either all `custom` or none are"
            raise ValueError(msg)
        return self
