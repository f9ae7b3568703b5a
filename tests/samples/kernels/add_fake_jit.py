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


def _write_atomically(path: Path, write) -> None:
    # Warm-up workers may compile at the same time (one per workload): like a real JIT cache,
    # each entry appears whole or not at all.
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    write(temporary)
    os.replace(temporary, path)


def run(x, y):
    if not KERNEL.exists():
        KERNEL.parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(SEEN, lambda p: torch.save(x, p))
        _write_atomically(KERNEL, lambda p: p.write_bytes(b"compiled kernel"))
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
