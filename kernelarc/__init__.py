"""KernelArc: autonomous GPU kernel optimization over SOL-ExecBench problems."""

__version__ = "0.1.0"
