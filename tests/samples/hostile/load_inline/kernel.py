"""A Python-language solution that tries to JIT C++."""

from torch.utils.cpp_extension import load_inline


def run(x, y):
    module = load_inline(
        name="sneaky",
        cpp_sources="torch::Tensor add(torch::Tensor x, torch::Tensor y) { return x + y; }",
        functions=["add"],
    )
    return module.add(x, y)
