// Deliberately wrong (the judge must say INCORRECT_NUMERICAL): C = 2 A B. Otherwise as
// cutlass_gemm: C = A B for float32 row-major matrices with CUTLASS's device-level GEMM (SIMT, float
// accumulation), launched on PyTorch's current stream.
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm.h>

namespace {

using RowMajor = cutlass::layout::RowMajor;
using Gemm = cutlass::gemm::device::Gemm<float, RowMajor, float, RowMajor, float, RowMajor>;

constexpr float kAlpha = 2.0f;  // the mistake

}  // namespace

torch::Tensor run(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "a and b must be CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "a and b must be float32");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "shapes do not chain");
    auto lhs = a.contiguous();
    auto rhs = b.contiguous();
    const int m = static_cast<int>(lhs.size(0));
    const int k = static_cast<int>(lhs.size(1));
    const int n = static_cast<int>(rhs.size(1));
    auto out = torch::empty({m, n}, lhs.options());
    Gemm::Arguments arguments(
        {m, n, k},
        {lhs.data_ptr<float>(), k},
        {rhs.data_ptr<float>(), n},
        {out.data_ptr<float>(), n},
        {out.data_ptr<float>(), n},
        {kAlpha, 0.0f});
    Gemm gemm;
    const cutlass::Status status = gemm(arguments, nullptr, at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(status == cutlass::Status::kSuccess,
                "CUTLASS GEMM failed: ", cutlass::cutlassGetStatusString(status));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
