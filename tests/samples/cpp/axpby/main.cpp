// CPU axpby, destination-passing style: out = alpha * x + y (float32). The loop lives in
// axpby_impl.cpp, a second top-level source; include/axpby_impl.h is a nested header found via
// the src/ include path. <torch/python.h> (tensor + pybind11 casters) instead of the usual
// <torch/extension.h> only halves the test's compile time; both work.
#include <torch/python.h>

#include "include/axpby_impl.h"

void run(const at::Tensor& x, const at::Tensor& y, double alpha, at::Tensor& out) {
    TORCH_CHECK(x.device().is_cpu() && y.device().is_cpu() && out.device().is_cpu(),
                "axpby: CPU tensors only");
    TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat &&
                    out.scalar_type() == at::kFloat,
                "axpby: float32 only");
    TORCH_CHECK(x.sizes() == y.sizes() && x.sizes() == out.sizes(), "axpby: shapes differ");
    TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && out.is_contiguous(),
                "axpby: contiguous tensors only");
    axpby_impl(x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), x.numel(),
               static_cast<float>(alpha));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run, "out = alpha * x + y"); }
