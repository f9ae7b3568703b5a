"""Round-to-nearest-even float32 -> bfloat16 casts under Triton's interpreter.

Place in the flow: on the CPU the runner (and the CPU checks of the kernel generator) run Triton
kernels in Triton's interpreter. Its float32 -> bfloat16 cast truncates the mantissa, where a GPU,
PyTorch and the reference round to nearest even, so on the CPU every bfloat16 store of a Triton
kernel was off by up to one unit in the last place, and a kernel that rounds an intermediate as
the reference does came out further from it than one that did not. `install()` replaces that
one conversion with torch's; every other conversion is left to the interpreter. It changes
nothing on a GPU (the interpreter is not used there) and is a no-op where the interpreter's
internals are not the ones it knows.
"""

import logging
from typing import Any

logger = logging.getLogger(__name__)

_MARK = "_kernelarc_rtne"


def install() -> bool:
    """Patch the interpreter's float conversion (once); whether it is patched."""
    try:
        import numpy as np
        import torch
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    original = getattr(interpreter, "_convert_float", None)
    if original is None:
        logger.info("Triton's interpreter has no _convert_float: bfloat16 casts left as they are")
        return False
    if getattr(original, _MARK, False):
        return True

    def convert(input: Any, input_dtype: Any, output_dtype: Any, rounding_mode: Any) -> Any:
        if input_dtype == tl.float32 and output_dtype == tl.bfloat16:
            values = torch.from_numpy(np.array(input, dtype=np.float32, copy=True))
            return values.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        return original(input, input_dtype, output_dtype, rounding_mode)

    setattr(convert, _MARK, True)
    interpreter._convert_float = convert
    return True
