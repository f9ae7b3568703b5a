"""The no-code rule of the shared memory: hostile claims are rejected, prose findings pass."""

import pytest

from kernelarc.coordination import code_reasons

PROSE = [
    pytest.param("BLOCK_H 2048 over 1024: +12% on rmsnorm (attempts 3 vs 5)", id="knob-finding"),
    pytest.param("NUM_WARPS 16 fails (COMPILE_ERROR) on rmsnorm (attempt 7)", id="failure"),
    pytest.param(
        "torch.compile with max-autotune beats eager by 20% on softmax; dynamic shapes cost 5%.",
        id="dotted-name-and-one-semicolon",
    ),
    pytest.param("Result: fusing the residual add into the norm kernel is faster.", id="label"),
    pytest.param("Larger row tiles (`BLOCK_T=64`) help: 1.4x vs 16 rows.", id="knob-in-ticks"),
    pytest.param("Using `num_warps` above 8 gives no gain for small hidden sizes.", id="name"),
    pytest.param("with BLOCK_T 16 the kernel is 10% faster than with 8", id="starts-with-with"),
    pytest.param("If the hidden size is small, one program per row wins.", id="starts-with-if"),
    pytest.param("speedup @ 8 warps is 1.3x, latency < 2 ms", id="at-sign-and-less-than"),
    pytest.param("fast and cheap", id="parses-as-boolop"),
]

HOSTILE = [
    pytest.param("```python\nout = x * w\n```", id="fence"),
    pytest.param("~~~\nout = x * w\n~~~", id="tilde-fence"),
    pytest.param("use `tl.load(x_ptr + offs, mask=m)` for the rows", id="code-in-backticks"),
    pytest.param("def run(x, weight): return x * weight", id="def"),
    pytest.param("class K:\n    pass", id="class"),
    pytest.param("@triton.jit on the kernel beats torch", id="decorator"),
    pytest.param("call tl.sum over axis 1 instead", id="tl-dot"),
    pytest.param("__global__ void k(float* x) { x[threadIdx.x] = 0; }", id="cuda-kernel"),
    pytest.param("int i = blockIdx.x * blockDim.x + threadIdx.x;", id="cuda-index"),
    pytest.param("#include <cuda_fp16.h> then use half2", id="include"),
    pytest.param("out = x * torch.rsqrt(x.pow(2).mean(-1) + eps) * w", id="assignment"),
    pytest.param("x * rsqrt(mean(x * x) + eps)", id="bare-expression-with-call"),
    pytest.param("for i in range(n):", id="block-header"),
    pytest.param("    return acc * 2", id="indented-return"),
    pytest.param("import triton.language as tl", id="import"),
    pytest.param("from torch.nn import functional", id="from-import"),
    pytest.param("kernel: y[i] = a[i] * b[i]", id="annotated-assignment"),
    pytest.param('torch.compile(run, mode="max-autotune") is faster', id="call-with-kwargs"),
    pytest.param("x = 1; y = 2;", id="semicolons"),
    pytest.param("lambda x: x + 1 as the epilogue", id="lambda"),
    pytest.param("then acc += x is cheaper", id="compound-assignment-in-prose"),
    pytest.param("Replacing the loop with out = x * inv is faster", id="assignment-in-prose"),
    pytest.param("store y[i] directly", id="indexing"),
    pytest.param("rows = {0: 1}", id="braces"),
    pytest.param("\uff44\uff45\uff46 f(x):\n    return x", id="fullwidth-def"),
    pytest.param("d\u200bef f(x):\n    re\u200bturn x", id="zero-width-split-keywords"),
    pytest.param("a\nb\nc\nd\ne", id="too-many-lines"),
    pytest.param("x=(a*b)|(c&d)^e", id="symbol-soup"),
]


@pytest.mark.parametrize("claim", PROSE)
def test_prose_findings_pass(claim: str) -> None:
    assert code_reasons(claim) == []


@pytest.mark.parametrize("claim", HOSTILE)
def test_hostile_claims_are_rejected(claim: str) -> None:
    assert code_reasons(claim), f"code slipped through: {claim!r}"
