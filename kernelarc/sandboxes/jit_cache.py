"""The host's cache of candidates' JIT caches (torch.compile's Inductor, Triton): the kernels a
candidate compiled, kept for that candidate's own later evaluations on this host.

Place in the flow: a `LocalSandbox` with `build_cache=DIR` looks up every Python request that
may JIT-compile (`may_jit`: on CUDA, or a source that mentions `compile`). On a hit, every file
of the entry is written into the runner's dir (its `cache/` dirs, handed to the runner's user)
before the runner gets its request, so its workers find the kernels compiled. On a miss the
request asks the runner to warm its caches first (`EvalRequest.warm_jit_caches`,
`kernelarc/runner/jit_warmup.py`); once the runner has ended, the files its judge hashed are
copied out of its dir (no link followed) and stored if every one still hashes as recorded. The
screen (in the correctness slot) thus compiles, and the timed evaluation and the guard's re-runs
of the same candidate do not.

Layout: `<DIR>/jit/<key>/manifest.json` (key, files with their sha256 and size) and
`<DIR>/jit/<key>/files/<path>`; `key` is `build_cache.cache_key` (the candidate's spec and
sources, the device, the sandbox's Python). Every lookup re-hashes every file; an entry that
fails is removed, logged, noted, and the candidate warms its caches again.

Threat model (the build cache's, `build_cache.py`, plus this): these files are written by the
candidate's own code (the JIT compilers run inside its calls), so an entry is only ever handed to
evaluations of the same candidate (the same key), and its bytes are those hashed by the judge
right after a warm-up that ran before any evaluation input, reference output or timing existed,
on inputs from a fresh random seed. So an entry carries nothing the candidate could not compute
from its own sources at import time; it cannot help it answer an evaluation's inputs or the
timing probe faster than it computes them. Candidates cannot write this cache (another uid, a
read-only filesystem in the jail); without the jail they can, as any file of the host user.
Disk use is capped per entry (the runner's MAX_FILES/MAX_BYTES); nothing is evicted:
remove `DIR/jit` to reclaim space.
"""

import hashlib
import json
import logging
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from kernelarc.sandboxes.build_cache import cache_key, is_cpp_request
from kernelarc.sandboxes.safe_files import (
    publish_dir,
    read_below,
    read_regular,
    write_below,
    write_private,
)
from kernelarc.schema import EvalRequest
from kernelarc.schema.build import CachedFile, JitSnapshot

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
FILES = "files"
_FORMAT = 1


def may_jit(request: EvalRequest) -> bool:
    """Whether the candidate may compile kernels at run time worth keeping: any Python candidate
    on CUDA (Triton, Inductor), on the CPU one whose sources mention `compile` (torch.compile;
    Triton runs in its interpreter there, with nothing to keep)."""
    if is_cpp_request(request):
        return False
    if request.device == "cuda":
        return True
    return any("compile" in source.content for source in request.solution.sources)


@dataclass(frozen=True)
class JitStaged:
    """A request as the runner gets it, and the cache files to write into its dir first."""

    request: EvalRequest
    files: dict[str, bytes]
    """Path relative to the runner's dir -> bytes (a hit); empty on a miss."""
    key: str | None
    """None: nothing to cache for this request."""
    notes: list[str]

    @property
    def hit(self) -> bool:
        """The runner starts with the candidate's caches."""
        return bool(self.files)


class JitCache:
    """Candidates' JIT cache files under `<root>/jit`, keyed by `cache_key`."""

    def __init__(self, root: str | Path) -> None:
        """Use `<root>/jit` (root: the build cache's dir); created with mode 0700."""
        self.root = Path(root) / "jit"
        self._lock = threading.Lock()

    def stage(self, request: EvalRequest, python: str) -> JitStaged:
        """A hit: the files to stage; a miss: the request with `warm_jit_caches` set."""
        if not may_jit(request):
            return JitStaged(request, {}, None, [])
        key = cache_key(request, python)
        files, note = self._lookup(key)
        notes = [note] if note else []
        if files:
            return JitStaged(request, files, key, notes)
        return JitStaged(request.model_copy(update={"warm_jit_caches": True}), {}, key, notes)

    def collect(self, staged: JitStaged, workdir: Path, snapshot: JitSnapshot | None) -> list[str]:
        """After the runner ended: store the caches its judge hashed after the warm-up (nothing
        on a hit, or when there was no warm-up); notes saying what happened."""
        if staged.key is None or staged.hit or snapshot is None or not snapshot.files:
            return []
        contents: dict[str, bytes] = {}
        for cached in snapshot.files:
            try:
                data = read_below(workdir, cached.path.split("/"))
            except OSError as exc:
                return [f"JIT cache: not stored, cannot read {cached.path} ({exc})"]
            if len(data) != cached.size or hashlib.sha256(data).hexdigest() != cached.sha256:
                logger.warning("JIT cache: %s changed after the judge hashed it", cached.path)
                return [f"JIT cache: not stored, {cached.path} changed after the judge hashed it"]
            contents[cached.path] = data
        with self._lock:
            self._write_entry(staged.key, snapshot, contents)
        logger.info("JIT cache: stored %d files as %s", len(contents), staged.key[:16])
        return [f"JIT cache: stored {len(contents)} files"]

    def _lookup(self, key: str) -> tuple[dict[str, bytes], str]:
        entry = self.root / key
        if not entry.is_dir():
            return {}, ""
        try:
            manifest = json.loads(read_regular(entry / MANIFEST))
            listed = _listed(manifest, key)
            files = {c.path: read_below(entry / FILES, c.path.split("/")) for c in listed.files}
        except (OSError, ValueError) as exc:
            return self._reject(key, f"unreadable ({exc})")
        for cached in listed.files:
            data = files[cached.path]
            if len(data) != cached.size or hashlib.sha256(data).hexdigest() != cached.sha256:
                return self._reject(key, f"sha256 of {cached.path} differs from the manifest's")
        return files, f"JIT cache hit: {len(files)} files"

    def _write_entry(self, key: str, snapshot: JitSnapshot, contents: dict[str, bytes]) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
        try:
            (staging / FILES).mkdir(mode=0o700)
            for path, data in contents.items():
                write_below(staging / FILES, path.split("/"), data, mode=0o600)
            manifest = {"format": _FORMAT, "key": key, **snapshot.model_dump(mode="json")}
            write_private(staging / MANIFEST, json.dumps(manifest, indent=1).encode("utf-8"))
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        publish_dir(staging, self.root / key)

    def _reject(self, key: str, problem: str) -> tuple[dict[str, bytes], str]:
        logger.warning(
            "JIT cache: entry %s failed its check (%s); removed, the caches are warmed again",
            key[:16],
            problem,
        )
        shutil.rmtree(self.root / key, ignore_errors=True)
        return {}, f"JIT cache entry {key[:16]} failed its check ({problem}); warmed again"


def _listed(manifest: object, key: str) -> JitSnapshot:
    """The manifest's files; ValueError when it is not this key's manifest."""
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT:
        msg = "manifest of another format"
        raise ValueError(msg)
    if manifest.get("key") != key:
        msg = "manifest names another key"
        raise ValueError(msg)
    files = [CachedFile.model_validate(f) for f in manifest.get("files", [])]
    return JitSnapshot(files=files)
