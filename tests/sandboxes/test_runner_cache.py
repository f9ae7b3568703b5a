"""Per-identity compile caches: ownership, the environment they give, trimming, the owned root.

Sharing between the candidates of one identity, and separation from the other identity, is
checked end to end through LocalSandbox in test_runner_accounts.py.
"""

import os
import stat
from pathlib import Path

import pytest

from kernelarc.errors import SandboxError
from kernelarc.sandboxes.runner_cache import (
    CACHE_VARIABLES,
    IdentityCaches,
    cache_env,
    give_to,
    size_over,
    trim,
)


def test_cache_env_points_every_variable_into_the_identity_dir(tmp_path: Path) -> None:
    env = cache_env(tmp_path / "65533-65533")
    assert set(env) == set(CACHE_VARIABLES) >= {"TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"}
    assert all(Path(v).parent == tmp_path / "65533-65533" for v in env.values())


def test_give_to_makes_a_private_dir_of_the_identity(tmp_path: Path) -> None:
    folder = tmp_path / "root" / "61600-61600"
    give_to(folder, 61600, 61600)
    info = folder.stat()
    assert stat.S_IMODE(info.st_mode) == 0o700
    if os.geteuid() == 0:
        assert (info.st_uid, info.st_gid) == (61600, 61600)
    (tmp_path / "file").write_text("x")
    with pytest.raises(SandboxError, match="compile cache"):
        give_to(tmp_path / "file", 61600, 61600)


def test_trim_empties_a_cache_past_its_limit_only(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    (folder / "triton" / "ab").mkdir(parents=True)
    (folder / "triton" / "ab" / "kernel.so").write_bytes(b"x" * 4096)
    (folder / "seen.txt").write_text("1\n")
    assert not size_over(folder, 8192) and size_over(folder, 1000)
    assert not trim(folder, 8192) and not trim(folder, None)
    assert (folder / "seen.txt").exists()
    assert trim(folder, 1000)
    assert folder.is_dir() and not any(folder.iterdir())


def test_an_owned_root_is_made_on_first_use_and_removed_at_close(tmp_path: Path) -> None:
    caches = IdentityCaches(None, tmp_path, None)
    assert not list(tmp_path.iterdir())
    folder = caches.folder(os.geteuid(), os.getegid())
    root = folder.parent
    assert root.name.startswith("kernelarc_cache_") and root.parent == tmp_path
    assert stat.S_IMODE(root.stat().st_mode) == 0o711
    caches.close()
    assert not root.exists()
    given = IdentityCaches(tmp_path / "given", tmp_path, None)
    given.folder(os.geteuid(), os.getegid())
    given.close()
    assert (tmp_path / "given").is_dir()
