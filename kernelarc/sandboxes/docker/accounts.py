"""The Docker sandbox's runner users: which they are, their accounts in the image, their caches.

Place in the flow: `DockerSandbox` picks its users at construction (`default_user`,
`runner_users`: runners alternate between two numeric users only where the host can give each
its own eval dir); `containers.py` mounts, for a new pool container, copies of the image's
/etc/passwd and /etc/group with an entry added for every numeric user the image lacks
(`image_databases`, read once from a container created and removed without ever starting;
`account_files`), so every runner user is a complete account (`runner_accounts.py`: USER and
LOGNAME name it). Each numeric user keeps its compile caches in its own dir of the pool dir
(`cache/<uid>-<gid>`, mode 0700: `runner_cache.py`) for the candidates that follow in that
container, emptied past the sandbox's limit once its runner has ended.
"""

import io
import logging
import os
import tarfile
from pathlib import Path
from typing import Any

import docker.errors

from kernelarc.sandboxes.docker.engine import DOCKER_ERRORS, EVAL_MOUNT, remove_container
from kernelarc.sandboxes.runner_accounts import Account, account_in, with_lines
from kernelarc.sandboxes.runner_cache import give_to, identity_folder, trim

logger = logging.getLogger(__name__)

#: In a pool dir: the numeric users' compile cache dirs, and the passwd/group copies.
CACHE_DIR = "cache"
ACCOUNTS_DIR = "accounts"


def numeric(user: str) -> tuple[int, int] | None:
    """`uid:gid` as numbers, or None for anything else (a name, a uid alone)."""
    uid, _, gid = user.partition(":")
    return (int(uid), int(gid)) if uid.isdigit() and gid.isdigit() else None


def default_user() -> str:
    """The runners' user when none is given: the host's own uid:gid (1000:1000 on a root host)."""
    # The host must be able to delete what the runner writes into the eval mount.
    return f"{os.getuid()}:{os.getgid()}" if os.getuid() != 0 else "1000:1000"


def runner_users(user: str, spare_user: str | None) -> tuple[str, ...]:
    """The users runners alternate between: two only when the host can give each its own
    eval dir (root, numeric uid:gid, not the same)."""
    if spare_user is None or spare_user == user or os.getuid() != 0:
        return (user,)
    first, second = numeric(user), numeric(spare_user)
    if first is None or second is None or first[0] == second[0]:
        return (user,)
    return (user, spare_user)


def image_databases(client: Any, image: str, labels: dict[str, str]) -> tuple[str, str] | None:
    """The image's /etc/passwd and /etc/group (from a container created with `labels` and
    removed without ever starting), or None when they cannot be read."""
    texts: list[str] = []
    container: Any = None
    try:
        container = client.containers.create(image, command=["true"], labels=labels)
        for path in ("/etc/passwd", "/etc/group"):
            try:
                chunks, _ = container.get_archive(path)
            except docker.errors.NotFound:
                texts.append("")
                continue
            with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
                member = tar.next()
                handle = tar.extractfile(member) if member is not None else None
                texts.append(handle.read().decode("utf-8", "replace") if handle else "")
    except (*DOCKER_ERRORS, tarfile.TarError) as exc:  # OSError: also the host lock
        logger.warning("cannot read the accounts of image %s: %s", image, exc)
        return None
    finally:
        if container is not None:
            remove_container(container)
    return texts[0], texts[1]


def account_files(
    pool_dir: Path,
    slot_key: str,
    users: dict[str, tuple[int, int]],
    databases: tuple[str, str] | None,
) -> tuple[dict[str, Account], dict[str, str]]:
    """Every numeric runner user's account in the container (USER/LOGNAME need only the
    name), and host file -> container path of the passwd/group copies that give each an
    entry (written under `pool_dir`; none when the image has them all, or `databases`, its
    passwd and group, could not be read)."""
    passwd, group = databases if databases is not None else ("", "")
    accounts = {u: account_in(passwd, group, *n, EVAL_MOUNT) for u, n in users.items()}
    passwd_lines = [line for a in accounts.values() for line in a.passwd_lines]
    group_lines = [line for a in accounts.values() for line in a.group_lines]
    if databases is None or not (passwd_lines or group_lines):
        return accounts, {}
    folder = pool_dir / ACCOUNTS_DIR
    try:
        folder.mkdir(mode=0o755)
        files = {}
        wanted = (("passwd", passwd, passwd_lines), ("group", group, group_lines))
        for name, text, lines in wanted:
            host_file = folder / name
            host_file.write_text(with_lines(text, lines), encoding="utf-8")
            host_file.chmod(0o644)
            files[str(host_file)] = f"/etc/{name}"
    except OSError as exc:
        logger.warning("cannot write the runner accounts for %s: %s", slot_key, exc)
        return accounts, {}
    return accounts, files


def make_cache_dir(pool_dir: Path, user: str) -> None:
    """The numeric user's compile cache dir in the pool dir, its own (mode 0700)."""
    ids = numeric(user)
    if ids is not None:
        give_to(identity_folder(pool_dir / CACHE_DIR, *ids), *ids)


def trim_cache(pool_dir: Path | None, user: str, limit_bytes: int | None) -> None:
    """Empty the user's cache dir if it grew too big (its runner has ended; the spare
    beside it, if any, is the other user)."""
    ids = numeric(user)
    if ids is not None and pool_dir is not None:
        trim(identity_folder(pool_dir / CACHE_DIR, *ids), limit_bytes)
