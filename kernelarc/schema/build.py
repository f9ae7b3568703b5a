"""Build records: a C++ extension the host hands to a runner, what a runner built, and the JIT
cache files a runner's warm-up left (`kernelarc/runner/jit_warmup.py`).

Place in the flow: the host's build cache (`kernelarc/sandboxes/build_cache.py`) puts a
`PrebuiltExtension` into `EvalRequest.prebuilt` when it holds a verified build of the request's
sources; the runner's judge uses it only when its own build identity and the file's hash match,
and reports what it did as a `BuildInfo` in the signed result (`EvalResult.build`), from which the
host fills the cache.
"""

from pydantic import Field

from kernelarc.schema.base import RecordModel

SHA256_HEX = r"^[0-9a-f]{64}$"


class PrebuiltExtension(RecordModel):
    """A cached build of the request's C++ sources, staged next to request.json by the host."""

    name: str = Field(pattern=r"^ka_[0-9a-f]{12}$")
    """The extension's module name (`cpp_build.extension_name`)."""
    sha256: str = Field(pattern=SHA256_HEX)
    """Hash of the shared object, as the judge recorded it when it was built."""
    identity: str
    """The build identity it was made for (name, torch, Python, platform; `cpp_build`)."""


class BuildInfo(RecordModel):
    """What the judge did about a C++ solution's build before any workload ran."""

    name: str
    """The extension's module name."""
    identity: str
    """Build identity: extension name, torch and CUDA versions, Python, platform."""
    sha256: str = Field(pattern=SHA256_HEX)
    """Hash of the shared object, taken by the judge right after the build (before any input
    existed), or of the verified prebuilt copy."""
    seconds: float = Field(ge=0)
    """Wall time of the build step (0 when the prebuilt copy was used)."""
    cached: bool
    """True: the host's prebuilt copy was verified and used, nothing was compiled."""
    note: str = ""
    """Why a prebuilt copy was not used (empty when it was, or when there was none)."""


class CachedFile(RecordModel):
    """One file of a runner's JIT caches, as the judge hashed it after the warm-up."""

    path: str = Field(pattern=r"^[^/]")
    """Path relative to the runner's dir (e.g. `cache/inductor/...`)."""
    sha256: str = Field(pattern=SHA256_HEX)
    """Hash of its bytes when the warm-up had ended (before any evaluation input existed)."""
    size: int = Field(ge=0)
    """Bytes."""


class JitSnapshot(RecordModel):
    """The files of a runner's JIT caches right after its warm-up."""

    files: list[CachedFile]
    """Every regular file under the cache dirs (Inductor, Triton), in walk order."""
