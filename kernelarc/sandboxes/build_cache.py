"""The host's build cache: verified builds of C++ solutions, kept between candidates and campaigns.

Place in the flow: a `LocalSandbox` made with `build_cache=DIR` (a campaign's sandboxes use
`~/.cache/kernelarc/builds`, `sandbox.build_cache`) looks up every C++ request here before its
runner gets the request. A hit is staged as `prebuilt.so` in the runner's dir and named in
`EvalRequest.prebuilt`; the judge uses it only when its own build identity and the bytes' hash
match (`kernelarc/runner/build_step.py`), so nothing is compiled. A miss is built by the judge
before any workload, and once the runner has ended (every process of it dead) the sandbox stores
the shared object here if its bytes still hash to what the judge recorded. With the executor's
correctness screen (a correctness slot, in parallel with the timed slot) the screen builds, and
the timed evaluation and the guard's re-runs of the same candidate find it built.

Layout: `<root>/<key>/extension.so` and `<root>/<key>/manifest.json` (key, extension name, build
identity, sha256, size). `key` is the SHA-256 of everything the host knows the build depends on
(the solution's spec and sources, the device, the sandbox's Python); what only the runner
knows (the GPU's compute capability, the torch build) is in the build identity, which the judge
checks, so a key that is too coarse costs a rebuild, never a wrong load. Every lookup checks the
entry before use: the manifest names this key, the file is a regular file of the recorded size,
and its bytes hash to the recorded sha256. An entry that fails is removed, the event is logged
(and noted in the evaluation's sandbox notes), and the candidate is built again. The root dir
and everything in it are created with mode 0700/0600 by the host user.

Threat model. Candidates run as another uid than the host (the jail, `jail.py`: `nobody` and
the spare user), with the whole filesystem read-only but their own temp dir, so they can neither
read nor write this cache, which only the host process touches; they only ever get a copy of an
entry in their own dir, and the judge re-hashes that copy before it uses it. The bytes stored
come from a judge's build that ran before any input of the evaluation existed: candidate code
can run during a build (its compile flags, its static constructors when the build child imports
the extension), so an entry may hold whatever the candidate's own sources produce, but nothing
derived from evaluation inputs, reference outputs or timings; anything that changes the file
after the judge hashed it (the candidate's code during the workloads) fails the host's hash
check and is not stored. An entry is only ever handed to a request with the same key, i.e. the
same sources and build options, so one candidate cannot plant a build for another. The host
reads the artefact out of the runner's dir without following links and only after the runner's
processes are dead. Not covered: without the jail (a non-root host, or `sandbox.jail=false`)
candidates run as the host user and can write this cache like any other file of that user (the
sandbox then protects nothing of the host's; its notes say so); the hash check still catches a
corrupted or swapped shared object whose manifest was not rewritten to match. Triton and
Inductor caches are written by candidate code while it runs, so they are never shared between
candidates; `jit_cache.py` keeps them per candidate, from a warm-up before any input existed.
"""

import hashlib
import json
import logging
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from kernelarc.config import default_build_cache_dir
from kernelarc.sandboxes.safe_files import publish_dir, read_below, read_regular, write_private
from kernelarc.schema import EvalRequest
from kernelarc.schema.build import BuildInfo, PrebuiltExtension
from kernelarc.schema.solution import CPP_LANGUAGES

logger = logging.getLogger(__name__)

#: Where a prebuilt copy goes in the runner's dir (`kernelarc.runner.build_step.PREBUILT_FILE`;
#: not imported from there: the runner package imports torch).
PREBUILT_FILE = "prebuilt.so"
ARTEFACT = "extension.so"
MANIFEST = "manifest.json"
_FORMAT = 1
_NAME = re.compile(r"ka_[0-9a-f]{12}")


def is_cpp_request(request: EvalRequest) -> bool:
    """True when the request's solution is built (C++ languages)."""
    return bool(set(request.solution.spec.languages) & CPP_LANGUAGES)


def cache_key(request: EvalRequest, python: str) -> str:
    """SHA-256 of what a build depends on that the host knows: the solution's spec and every
    source (path and content), the device and the sandbox's Python."""
    solution = request.solution
    payload = {
        "format": _FORMAT,
        "device": request.device,
        "python": python,
        "spec": solution.spec.model_dump(mode="json", exclude_unset=True),
        "sources": sorted((s.path, s.content) for s in solution.sources),
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedBuild:
    """A verified entry: the bytes to stage and what to tell the judge about them."""

    data: bytes
    prebuilt: PrebuiltExtension


@dataclass(frozen=True)
class Staged:
    """A request as the runner gets it: with `prebuilt` set on a hit, and the files to put into
    the runner's dir (`prebuilt.so`); `key` None for requests that build nothing."""

    request: EvalRequest
    files: dict[str, bytes]
    key: str | None
    notes: list[str]


@dataclass(frozen=True)
class Lookup:
    """A lookup's outcome: the verified entry (None: miss) and a note for the sandbox notes."""

    hit: CachedBuild | None
    note: str = ""


class BuildCache:
    """Verified C++ builds under `root`, keyed by `cache_key`; thread-safe within a process,
    and safe between processes (entries appear by rename)."""

    def __init__(self, root: str | Path | None = None) -> None:
        """Use `root` (None: `config.default_build_cache_dir()`); created with mode 0700."""
        self.root = Path(root) if root is not None else default_build_cache_dir()
        self._lock = threading.Lock()

    def stage(self, request: EvalRequest, python: str) -> Staged:
        """Look the request's build up: on a hit, the request names the prebuilt copy and the
        copy's bytes go into the runner's dir as `prebuilt.so`."""
        if not is_cpp_request(request):
            return Staged(request, {}, None, [])
        key = cache_key(request, python)
        found = self.lookup(key)
        notes = [found.note] if found.note else []
        if found.hit is None:
            return Staged(request, {}, key, notes)
        staged = request.model_copy(update={"prebuilt": found.hit.prebuilt})
        return Staged(staged, {PREBUILT_FILE: found.hit.data}, key, notes)

    def collect(self, staged: Staged, workdir: Path, build: BuildInfo | None) -> list[str]:
        """After the runner ended: store what its judge built (nothing when it used the cached
        copy or built nothing); notes saying what happened."""
        if staged.key is None or build is None or build.cached:
            return []
        return [self.store(staged.key, workdir, build)]

    def lookup(self, key: str) -> Lookup:
        """The entry of `key`, checked: a hit, a miss, or a failed check (entry removed)."""
        entry = self.root / key
        if not entry.is_dir():
            return Lookup(None)
        try:
            manifest = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
            data = read_regular(entry / ARTEFACT)
        except (OSError, ValueError) as exc:
            return self._reject(key, f"unreadable ({exc})")
        problem = _manifest_problem(manifest, key, data)
        if problem:
            return self._reject(key, problem)
        prebuilt = PrebuiltExtension(
            name=manifest["name"], sha256=manifest["sha256"], identity=manifest["identity"]
        )
        return Lookup(CachedBuild(data, prebuilt), f"build cache hit: {prebuilt.name}")

    def store(self, key: str, workdir: Path, info: BuildInfo) -> str:
        """Copy the judge's build `info` out of a finished runner's `workdir` into the entry of
        `key`, if its bytes hash to `info.sha256`; a note saying what happened."""
        if not _NAME.fullmatch(info.name):
            return f"build cache: not stored, bad extension name {info.name!r}"
        try:
            data = read_below(workdir, ("build", f"{info.name}.so"))
        except OSError as exc:
            return f"build cache: not stored, cannot read the build ({exc})"
        if hashlib.sha256(data).hexdigest() != info.sha256:
            logger.warning(
                "build cache: %s changed after the judge hashed it; not stored", info.name
            )
            return f"build cache: not stored, {info.name}.so changed after the judge hashed it"
        manifest = {
            "format": _FORMAT,
            "key": key,
            "name": info.name,
            "identity": info.identity,
            "sha256": info.sha256,
            "size": len(data),
            "build_s": info.seconds,
        }
        with self._lock:
            self._write_entry(key, data, manifest)
        logger.info("build cache: stored %s as %s", info.name, key[:16])
        return f"build cache: stored {info.name}"

    def _write_entry(self, key: str, data: bytes, manifest: dict[str, object]) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
        try:
            write_private(staging / ARTEFACT, data)
            write_private(staging / MANIFEST, json.dumps(manifest, indent=1).encode("utf-8"))
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        publish_dir(staging, self.root / key)

    def _reject(self, key: str, problem: str) -> Lookup:
        logger.warning(
            "build cache: entry %s failed its check (%s); removed, the solution is rebuilt",
            key[:16],
            problem,
        )
        shutil.rmtree(self.root / key, ignore_errors=True)
        return Lookup(None, f"build cache entry {key[:16]} failed its check ({problem}); rebuilt")


def _manifest_problem(manifest: object, key: str, data: bytes) -> str:
    """Why an entry must not be used ('' when it may)."""
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT:
        return "manifest of another format"
    if manifest.get("key") != key:
        return "manifest names another key"
    name = manifest.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return "manifest has no valid extension name"
    if not isinstance(manifest.get("identity"), str):
        return "manifest has no build identity"
    if manifest.get("size") != len(data):
        return f"size {len(data)} != recorded {manifest.get('size')}"
    if hashlib.sha256(data).hexdigest() != manifest.get("sha256"):
        return "sha256 of the shared object differs from the manifest's"
    return ""
