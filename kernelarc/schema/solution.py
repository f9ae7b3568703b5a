"""The SOL-ExecBench `solution.json` model: build spec and source files."""

import hashlib
from enum import StrEnum
from pathlib import PurePosixPath

from pydantic import Field, field_validator, model_validator

from kernelarc.schema.base import WireModel


class Language(StrEnum):
    """Solution languages of the format, in two groups that may not be mixed."""

    PYTORCH = "pytorch"
    TRITON = "triton"
    CUTE_DSL = "cute_dsl"
    CUTILE = "cutile"
    CUDNN_FRONTEND = "cudnn_frontend"
    CUTLASS = "cutlass"
    CUDNN = "cudnn"
    CUBLAS = "cublas"
    CUDA_CPP = "cuda_cpp"


PYTHON_LANGUAGES = frozenset(
    {Language.PYTORCH, Language.TRITON, Language.CUTE_DSL, Language.CUTILE, Language.CUDNN_FRONTEND}
)
CPP_LANGUAGES = frozenset({Language.CUTLASS, Language.CUDNN, Language.CUBLAS, Language.CUDA_CPP})
CPP_SUFFIXES = frozenset({".cu", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".cuh"})


class TargetHardware(StrEnum):
    """Hardware targets the official model accepts (upper-case only)."""

    B200 = "B200"
    LOCAL = "LOCAL"


class CompileOptions(WireModel):
    """C++ build flags; a list given replaces its default."""

    cflags: list[str] = Field(default_factory=list)
    """Host compiler flags."""
    cuda_cflags: list[str] = Field(default_factory=lambda: ["-O3", "--use_fast_math"])
    """nvcc flags."""
    ld_flags: list[str] = Field(default_factory=lambda: ["-lcuda"])
    """Linker flags."""


class BuildSpec(WireModel):
    """How to build and call a solution."""

    languages: list[Language] = Field(min_length=1)
    """Languages used (one group only)."""
    target_hardware: list[TargetHardware] = Field(min_length=1)
    """`B200` and/or `LOCAL`."""
    entry_point: str
    """`file::symbol`, the file being one of the sources."""
    destination_passing_style: bool = True
    """True: outputs are preallocated and passed after the inputs; False: `run` returns them."""
    binding: str | None = None
    """Only `torch` is defined (unused by the evaluator)."""
    dependencies: list[str] = Field(default_factory=list)
    """Free-form dependency names (unused by the evaluator)."""
    compile_options: CompileOptions | None = None
    """C++ build flags."""

    @field_validator("binding")
    @classmethod
    def _binding_is_torch(cls, value: str | None) -> str | None:
        if value is not None and value != "torch":
            msg = f"spec.binding must be 'torch' (got {value!r})"
            raise ValueError(msg)
        return value

    @model_validator(mode="after")
    def _check_spec(self) -> "BuildSpec":
        langs = set(self.languages)
        if langs & PYTHON_LANGUAGES and langs & CPP_LANGUAGES:
            msg = (
                f"spec.languages mixes Python {sorted(langs & PYTHON_LANGUAGES)} and C++ "
                f"{sorted(langs & CPP_LANGUAGES)} languages; use one group"
            )
            raise ValueError(msg)
        parts = self.entry_point.split("::")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            msg = f"spec.entry_point {self.entry_point!r} must look like 'file.py::run'"
            raise ValueError(msg)
        suffix = PurePosixPath(parts[0]).suffix
        if langs <= PYTHON_LANGUAGES and suffix != ".py":
            msg = f"spec.entry_point file {parts[0]!r} must be a .py file for Python languages"
            raise ValueError(msg)
        if langs <= CPP_LANGUAGES and suffix not in CPP_SUFFIXES:
            msg = f"spec.entry_point file {parts[0]!r} must be one of {sorted(CPP_SUFFIXES)}"
            raise ValueError(msg)
        return self

    @property
    def entry_file(self) -> str:
        """The entry point's file path."""
        return self.entry_point.split("::")[0]

    @property
    def entry_symbol(self) -> str:
        """The entry point's function name."""
        return self.entry_point.split("::")[1]


class SourceFile(WireModel):
    """One source file of a solution."""

    path: str = Field(min_length=1)
    """Relative POSIX path; no absolute paths and no `..`."""
    content: str = Field(min_length=1)
    """File text."""

    @field_validator("path")
    @classmethod
    def _safe_path(cls, value: str) -> str:
        path = PurePosixPath(value)
        if path.is_absolute() or value.startswith(("/", "\\")) or ":" in path.parts[0]:
            msg = f"source path {value!r} is absolute; use a path relative to the solution"
            raise ValueError(msg)
        if ".." in path.parts or "\\" in value:
            msg = f"source path {value!r} contains '..' or a backslash; use a plain relative path"
            raise ValueError(msg)
        return value


class Solution(WireModel):
    """A candidate implementation of a definition."""

    name: str = Field(min_length=1)
    """Solution name."""
    definition: str = Field(min_length=1)
    """Name of the definition it solves."""
    author: str = Field(min_length=1)
    """Who wrote it (an agent name for KernelArc's candidates)."""
    spec: BuildSpec
    """Build and call spec."""
    sources: list[SourceFile] = Field(min_length=1)
    """Source files."""
    description: str | None = None
    """Free text."""

    @model_validator(mode="after")
    def _check_sources(self) -> "Solution":
        paths = [s.path for s in self.sources]
        dupes = sorted({p for p in paths if paths.count(p) > 1})
        if dupes:
            msg = f"duplicate source paths {dupes}; each path may appear once"
            raise ValueError(msg)
        if self.spec.entry_file not in paths:
            msg = (
                f"spec.entry_point file {self.spec.entry_file!r} is not among the sources "
                f"{paths}; add it or fix the entry point"
            )
            raise ValueError(msg)
        return self

    def content_hash(self) -> str:
        """Hash of what determines behaviour: languages, entry point, DPS and normalized sources."""
        digest = hashlib.sha256()
        digest.update("|".join(sorted(self.spec.languages)).encode())
        digest.update(self.spec.entry_point.encode())
        digest.update(str(self.spec.destination_passing_style).encode())
        for source in sorted(self.sources, key=lambda s: s.path):
            digest.update(source.path.encode() + b"\0")
            digest.update(_normalize_source(source.content).encode() + b"\0")
        return digest.hexdigest()


def _normalize_source(text: str) -> str:
    """Strip trailing whitespace and blank lines so cosmetic edits do not defeat dedupe."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    return "\n".join(line for line in lines if line)
