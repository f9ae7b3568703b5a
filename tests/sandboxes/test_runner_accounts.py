"""Runner accounts: every runner identity has a name and an entry, even a uid the host lacks.

The end-to-end test runs LocalSandbox's runners as two uids with no passwd or group entry on
this machine (found at run time, as on the GPU host where the second jail uid had none and
every torch.compile candidate died in `getpass.getuser()`). The candidate asks what Inductor,
Triton and other libraries ask: `getpass.getuser()`, `pwd.getpwuid`, `grp.getgrgid`, HOME and
the compile cache dirs. Without the fix it ends RUNTIME_ERROR under such a uid.
"""

import grp
import pwd
import stat
from pathlib import Path

import pytest
from vector_add_request import vector_add_request

from kernelarc.sandboxes import LocalSandbox
from kernelarc.sandboxes.runner_accounts import (
    account_env,
    account_in,
    generated_name,
    host_account,
    with_lines,
)
from kernelarc.schema import EvalResult, EvalStatus

TIMEOUT_S = 180.0

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
#: Asks what Inductor, Triton and friends ask about the user; records its uid in the cache.
ASKS_WHO_IT_IS = (SAMPLES / "kernels" / "add_asks_who_it_is.py").read_text()


def _unknown_ids(count: int, below: int = 65533) -> list[int]:
    """Numbers that are neither a uid nor a gid on this machine, highest first."""
    found: list[int] = []
    number = below
    while len(found) < count and number > 1000:
        try:
            pwd.getpwuid(number)
        except KeyError:
            try:
                grp.getgrgid(number)
            except KeyError:
                found.append(number)
        number -= 1
    return found


def _statuses(result: EvalResult) -> set[EvalStatus]:
    return {t.evaluation.status for t in result.traces if t.evaluation is not None}


def test_host_account_names_a_missing_uid_and_adds_its_lines() -> None:
    (number,) = _unknown_ids(1)
    account = host_account(number, number, "/work/here")
    assert account.name == generated_name(number) == f"kernelarc-{number}"
    assert account.passwd_lines == (
        f"kernelarc-{number}:x:{number}:{number}:KernelArc sandbox runner:/work/here:"
        "/usr/sbin/nologin",
    )
    assert account.group_lines == (f"kernelarc-{number}:x:{number}:",)
    assert account_env(account) == {"USER": f"kernelarc-{number}", "LOGNAME": f"kernelarc-{number}"}
    root = host_account(0, 0, "/root")
    assert (root.name, root.passwd_lines, root.group_lines) == (pwd.getpwuid(0).pw_name, (), ())


def test_account_in_an_image_and_appending_lines_once() -> None:
    passwd = "root:x:0:0:root:/root:/bin/sh\nkernelarc:x:1000:1000::/work:/bin/sh"
    group = "root:x:0:\nkernelarc:x:1000:\n"
    known = account_in(passwd, group, 1000, 1000, "/work/eval")
    assert (known.name, known.passwd_lines, known.group_lines) == ("kernelarc", (), ())
    missing = account_in(passwd, group, 1001, 1001, "/work/eval")
    assert missing.name == "kernelarc-1001" and len(missing.passwd_lines) == 1
    extended = with_lines(passwd, [*missing.passwd_lines, *missing.passwd_lines])
    assert extended.splitlines()[:2] == passwd.splitlines()
    assert extended.count("kernelarc-1001") == 1 and extended.endswith("\n")
    assert with_lines(extended, missing.passwd_lines) == extended


def test_runners_under_uids_without_entries_are_complete_accounts(tmp_path: Path) -> None:
    """Two jail identities the host has no passwd/group entry for: both pass a candidate that
    asks who it is, and each keeps its own compile cache for the candidates after it."""
    first, second = _unknown_ids(2)
    cache = tmp_path / "cache"
    with LocalSandbox(
        user=(first, first),
        spare_user=(second, second),
        cache_dir=cache,
        resident_requests=0,  # one runner per evaluation: both identities get one
    ) as sandbox:
        results = [
            sandbox.evaluate(
                vector_add_request(ASKS_WHO_IT_IS, name=f"who{i}"), timeout_s=TIMEOUT_S
            )
            for i in range(3)
        ]
    for result in results:
        assert _statuses(result) == {EvalStatus.PASSED}, result.stderr_tail[-3000:]
    if any(n.startswith("no jail") for n in results[0].sandbox_notes):
        pytest.skip(
            f"runners ran as this process's user, not the jail's: {results[0].sandbox_notes}"
        )
    # Runners alternate: first, second, first. Each identity's dir is its own (0700) and kept.
    seen = {}
    for uid in (first, second):
        folder = cache / f"{uid}-{uid}"
        info = folder.stat()
        assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (uid, uid, 0o700)
        seen[uid] = (folder / "seen.txt").read_text().split()
    assert seen == {first: [str(first), str(first)], second: [str(second)]}
