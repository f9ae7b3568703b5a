"""Library-configuration and precision variants of the reference, as one `KnobSpace`.

Place in the flow: the `library` and `precision` strategy agents call `torch_space` once per
problem and `render_torch` per setting. A variant is the reference itself plus settings around
it, so it is correct wherever the tolerance allows the numerics it chooses:

- `gemm_path` (library): the GEMM of a GEMM+bias(+activation) problem (the template library's
  `gemm_epilogue` match) through `torch.addmm`, or, for a GELU or ReLU epilogue, through
  `torch._addmm_activation`, which on CUDA runs bias and activation in the cuBLASLt epilogue;
- `blas` (library, CUDA): `torch.backends.cuda.preferred_blas_library` (cuBLAS or cuBLASLt);
- `tf32` (library, CUDA): TF32 tensor cores for float32 matmuls and convolutions;
- `compute_dtype` (precision): run the reference under `torch.autocast` in bfloat16 or float16,
  outputs cast back to the declared dtypes;
- `matmul_precision` (precision, CUDA): `torch.set_float32_matmul_precision`.

All of them only matter where the problem multiplies matrices, so without a matmul the space is
empty and both agents say they do not apply. The all-default setting (the reference as-is) is
never a candidate: the compiler agent already proposes it.
"""

from collections.abc import Mapping

from kernelarc.agents.knob_search import KnobSpace, KnobValue
from kernelarc.agents.triton.template_library import TemplateMatch, match_template
from kernelarc.problems.files import Problem
from kernelarc.reference_ops import CONV_NAMES, MATMUL_NAMES, uses_operations
from kernelarc.schema import Definition, DType

GEMM_FAMILY = "gemm_epilogue"
"""The template family whose match gives the GEMM's roles (a, b, bias) and epilogue."""
#: The template's ACTIVATION codes (template_matchers.find_activation) and the torch call of each.
_ACTIVATIONS = {
    "0": "{y}",
    "1": '_ka_torch.nn.functional.gelu({y}, approximate="none")',
    "2": '_ka_torch.nn.functional.gelu({y}, approximate="tanh")',
    "3": "_ka_torch.nn.functional.silu({y})",
    "4": "_ka_torch.relu({y})",
}
#: ACTIVATION codes `torch._addmm_activation` runs in the epilogue (use_gelu True / False). Its
#: GELU is the tanh form on CUDA (cuBLASLt) and the erf form on CPU; the two differ by < 1e-3,
#: inside the bf16/fp16 tolerances, and the evaluator judges every variant anyway.
_FUSED_ACTIVATIONS = {"1": True, "2": True, "4": False}
_FLOAT_OUT = {DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16, DType.FLOAT64}

LIBRARY_KNOBS = ("gemm_path", "blas", "tf32")
"""Knobs the library strategy owns."""
PRECISION_KNOBS = ("compute_dtype", "matmul_precision")
"""Knobs the precision strategy owns."""
DEFAULTS: dict[str, KnobValue] = {
    "gemm_path": "reference",
    "blas": "default",
    "tf32": False,
    "compute_dtype": "reference",
    "matmul_precision": "highest",
}
"""The setting that is the reference as-is."""


def has_matmul(definition: Definition) -> bool:
    """op_type gemm/matmul/linear, or a reference that multiplies matrices or convolves."""
    if (definition.op_type or "").lower() in ("gemm", "matmul", "linear", "conv"):
        return True
    return uses_operations(definition.reference, MATMUL_NAMES | CONV_NAMES)


def torch_space(problem: Problem, device: str) -> tuple[KnobSpace, TemplateMatch | None] | str:
    """The variant space of `problem` on `device` (with the GEMM roles when the problem is a
    GEMM with a bias and an epilogue `torch.addmm` can serve), or why there is none."""
    definition = problem.definition
    if not has_matmul(definition):
        return "the problem has no matmul: library and precision settings do not apply"
    gemm = _addmm_gemm(problem)
    cuda = device == "cuda"
    options: dict[str, tuple[KnobValue, ...]] = {
        "gemm_path": _gemm_paths(gemm),
        "blas": ("default", "cublaslt", "cublas") if cuda else ("default",),
        "tf32": (False, True) if cuda else (False,),
        "compute_dtype": ("reference", "bfloat16", "float16"),
        "matmul_precision": ("highest", "high", "medium") if cuda else ("highest",),
    }
    owners = {k: "library" for k in LIBRARY_KNOBS} | {k: "precision" for k in PRECISION_KNOBS}
    space = KnobSpace(
        family="torch/reference",
        options=options,
        default=dict(DEFAULTS),
        owners=owners,
        allowed=lambda knobs: any(knobs[k] != v for k, v in DEFAULTS.items()),
    )
    return space, gemm


def _addmm_gemm(problem: Problem) -> TemplateMatch | None:
    """The `gemm_epilogue` match of a GEMM with a bias (what `torch.addmm` computes), else None."""
    found = match_template(problem)
    if isinstance(found, list):
        return None
    _, match = found
    constants = dict(match.constants)
    if match.family != GEMM_FAMILY or constants.get("HAS_BIAS") != "True":
        return None
    if constants.get("ACTIVATION") not in _ACTIVATIONS:
        return None
    return match


def _gemm_paths(gemm: TemplateMatch | None) -> tuple[KnobValue, ...]:
    """The GEMM library paths a match allows (`_addmm_activation` fuses GELU or ReLU only)."""
    if gemm is None:
        return ("reference",)
    if dict(gemm.constants)["ACTIVATION"] in _FUSED_ACTIVATIONS:
        return ("reference", "addmm", "addmm_activation")
    return ("reference", "addmm")


def render_torch(
    definition: Definition, gemm: TemplateMatch | None, knobs: Mapping[str, KnobValue], note: str
) -> str:
    """The kernel.py source of one setting: the reference, the settings, and a `run` that
    applies them."""
    params = ", ".join(definition.inputs)
    lines = [
        definition.reference.rstrip(),
        "",
        "",
        f"# KernelArc library/precision variant: {note}",
        "import torch as _ka_torch",
        "",
        "_ka_reference_run = run",
        f"_KA_OUT_DTYPES = ({''.join(_dtype_item(s.dtype) for s in definition.outputs.values())})",
        *_settings_lines(knobs),
        "",
        "",
        f"def run({params}):",
        *_body_lines(definition, gemm, knobs, params),
        "",
        "",
        "def _ka_cast(out):",
        "    if isinstance(out, tuple):",
        "        return tuple(_ka_cast_one(o, d) for o, d in zip(out, _KA_OUT_DTYPES))",
        "    return _ka_cast_one(out, _KA_OUT_DTYPES[0])",
        "",
        "",
        "def _ka_cast_one(value, dtype):",
        "    if dtype is None or not isinstance(value, _ka_torch.Tensor):",
        "        return value",
        "    return value.to(dtype)",
    ]
    return "\n".join(lines) + "\n"


def _dtype_item(dtype: DType) -> str:
    return f"_ka_torch.{dtype.value}, " if dtype in _FLOAT_OUT else "None, "


def _settings_lines(knobs: Mapping[str, KnobValue]) -> list[str]:
    """Module-level library settings (these run in the candidate's own worker process only)."""
    lines: list[str] = []
    if knobs["blas"] != "default":
        lines += [
            "if _ka_torch.cuda.is_available():",
            f"    _ka_torch.backends.cuda.preferred_blas_library({knobs['blas']!r})",
        ]
    if knobs["tf32"]:
        lines += [
            "_ka_torch.backends.cuda.matmul.allow_tf32 = True",
            "_ka_torch.backends.cudnn.allow_tf32 = True",
        ]
    if knobs["matmul_precision"] != "highest":
        lines.append(f"_ka_torch.set_float32_matmul_precision({knobs['matmul_precision']!r})")
    return lines


def _body_lines(
    definition: Definition, gemm: TemplateMatch | None, knobs: Mapping[str, KnobValue], params: str
) -> list[str]:
    call = f"_ka_reference_run({params})"
    if gemm is not None and knobs["gemm_path"] != "reference":
        roles = dict(gemm.input_roles)
        constants = dict(gemm.constants)
        a, b, bias = roles["a"], roles["b"], roles["bias"]
        # The template's b is [N, K] (nn.Linear weight) or [K, N]; addmm wants [K, N].
        b_kn = f"{b}.float().t()" if constants["B_IS_NK"] == "True" else f"{b}.float()"
        operands = f"{bias}.float(), {a}.float(), {b_kn}"
        activation = constants["ACTIVATION"]
        if knobs["gemm_path"] == "addmm_activation":
            use_gelu = _FUSED_ACTIVATIONS[activation]
            call = f"_ka_torch._addmm_activation({operands}, use_gelu={use_gelu})"
        else:
            call = _ACTIVATIONS[activation].format(y=f"_ka_torch.addmm({operands})")
    if knobs["compute_dtype"] == "reference":
        return [f"    return _ka_cast({call})"]
    first = next(iter(definition.inputs))
    dtype = f"_ka_torch.{knobs['compute_dtype']}"
    return [
        f"    device = {first}.device.type if isinstance({first}, _ka_torch.Tensor) else 'cpu'",
        f"    with _ka_torch.autocast(device_type=device, dtype={dtype}):",
        f"        out = {call}",
        "    return _ka_cast(out)",
    ]
