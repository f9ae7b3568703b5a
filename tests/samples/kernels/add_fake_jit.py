# A stand-in for a JIT compiler (torch.compile, Triton), cheap enough for tests: its "compiled
# kernel" is a file in the Inductor cache dir, written on the first call if absent. It says on
# stderr whether it found the kernel, and it fails on purpose if it is ever called again on the
# inputs it compiled with (a warm-up must never see an evaluation's inputs).
import os
import sys
from pathlib import Path

import torch

CACHE = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
KERNEL = CACHE / "fake" / "kernel.bin"
SEEN = CACHE / "fake" / "first_inputs.pt"
STATE = {"reported": False}


def run(x, y):
    if not KERNEL.exists():
        KERNEL.parent.mkdir(parents=True, exist_ok=True)
        KERNEL.write_bytes(b"compiled kernel")
        torch.save(x, SEEN)
        sys.stderr.write("FAKE-JIT: compiled\n")
        return x + y
    if not STATE["reported"]:
        sys.stderr.write(f"FAKE-JIT: found {KERNEL.read_bytes()!r}\n")
    STATE["reported"] = True
    first = torch.load(SEEN)
    if first.shape == x.shape and torch.equal(first, x):
        sys.stderr.write("FAKE-JIT: called again on the compile-time inputs\n")
        return x - y
    return x + y
