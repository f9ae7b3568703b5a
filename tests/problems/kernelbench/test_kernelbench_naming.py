"""Names, levels and op_types of converted KernelBench files, from their paths."""

from pathlib import Path

import pytest

from kernelarc.problems.kernelbench.naming import level_of, op_type_of, problem_name


@pytest.mark.parametrize(
    ("path", "level", "name", "op_type"),
    [
        ("KernelBench/level1/36_RMSNorm_.py", 1, "kb_l1_36_rmsnorm", "norm"),
        ("KernelBench/level1/1_Square_matrix_multiplication_.py", 1, None, "matmul"),
        ("KernelBench/level1/5_Matrix_scalar_multiplication.py", 1, None, "elementwise"),
        ("KernelBench/level1/24_LogSoftmax.py", 1, None, "softmax"),
        (
            "KernelBench/level1/57_conv_transposed_2D__square_input__square_kernel.py",
            1,
            None,
            "conv",
        ),
        ("KernelBench/level1/95_CrossEntropyLoss.py", 1, None, "loss"),
        ("KernelBench/level1/26_GELU_.py", 1, None, "activation"),
        ("KernelBench/level1/51_Argmax_over_a_dimension.py", 1, None, "reduction"),
        ("KernelBench/level1/42_Max_Pooling_2D.py", 1, None, "pooling"),
        (
            "KernelBench/level2/12_Gemm_Multiply_LeakyReLU.py",
            2,
            "kb_l2_12_gemm_multiply_leakyrelu",
            "fused_gemm",
        ),
        ("KernelBench/level2/1_Conv2D_ReLU_BiasAdd.py", 2, None, "fused_conv"),
        (
            "KernelBench/level2/28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply.py",
            2,
            None,
            "fused_gemm",
        ),
        ("elsewhere/my_op.py", None, "kb_my_op", None),
    ],
)
def test_names_levels_and_op_types(
    path: str, level: int | None, name: str | None, op_type: str | None
) -> None:
    p = Path(path)
    assert level_of(p) == level
    if name is not None:
        assert problem_name(p, level) == name
    assert op_type_of(p, level) == op_type
