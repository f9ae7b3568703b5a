"""Accounts for the sandbox runners' uids: a name every library accepts, on any host or image.

Place in the flow: LocalSandbox and DockerSandbox run each runner as a numeric uid:gid (two of
them, alternating: `local/runner_identities.py`, `docker/accounts.py`) that need not exist on the
host or in the image. Libraries then fail in ways that look like the candidate's fault:
`getpass.getuser()` raises KeyError for a uid without a passwd entry, and Inductor (torch 2.11)
calls it at import to name its default cache dir, so every `torch.compile` candidate crashed under
the second uid of a GPU host. Two layers make every identity a complete account:

- the environment: `USER` and `LOGNAME` (which `getpass` reads before the passwd database),
  next to `HOME`, set for every runner (`account_env`);
- the passwd/group databases: the lines a uid or gid lacks (`missing_lines`), which the jail
  appends to private copies of /etc/passwd and /etc/group in the runner's mount namespace and
  DockerSandbox to copies of the image's, mounted read-only over them (`with_lines`), so code
  that calls `pwd.getpwuid` itself works too.

A uid with an entry keeps its name (`nobody`); one without gets `kernelarc-<uid>` (a gid:
`kernelarc-<gid>`), home the runner's dir, shell nologin. Only the standard library.
"""

import grp
import pwd
from dataclasses import dataclass

NOLOGIN = "/usr/sbin/nologin"


@dataclass(frozen=True)
class Account:
    """A runner identity's name and the database lines it still needs."""

    name: str
    """The passwd name: the existing one, or `kernelarc-<uid>`."""
    passwd_lines: tuple[str, ...] = ()
    """Lines to append to /etc/passwd (empty when the uid has an entry)."""
    group_lines: tuple[str, ...] = ()
    """Lines to append to /etc/group (empty when the gid has an entry)."""


def generated_name(uid: int) -> str:
    """The name given to a uid that has none."""
    return f"kernelarc-{uid}"


def host_account(uid: int, gid: int, home: str) -> Account:
    """The account of `uid:gid` as this host's databases see it (what a local runner, jailed
    or not, sees), with the lines it lacks."""
    try:
        name = pwd.getpwuid(uid).pw_name
        passwd: tuple[str, ...] = ()
    except KeyError:
        name = generated_name(uid)
        passwd = (passwd_line(name, uid, gid, home),)
    try:
        grp.getgrgid(gid)
        group: tuple[str, ...] = ()
    except KeyError:
        group = (group_line(gid),)
    return Account(name, passwd, group)


def account_in(passwd_text: str, group_text: str, uid: int, gid: int, home: str) -> Account:
    """The account of `uid:gid` in given passwd/group file contents (a Docker image's)."""
    name = _name_of(passwd_text, uid)
    passwd: tuple[str, ...] = ()
    if name is None:
        name = generated_name(uid)
        passwd = (passwd_line(name, uid, gid, home),)
    group = () if _name_of(group_text, gid) is not None else (group_line(gid),)
    return Account(name, passwd, group)


def passwd_line(name: str, uid: int, gid: int, home: str) -> str:
    """One /etc/passwd line."""
    return f"{name}:x:{uid}:{gid}:KernelArc sandbox runner:{home}:{NOLOGIN}"


def group_line(gid: int) -> str:
    """One /etc/group line."""
    return f"{generated_name(gid)}:x:{gid}:"


def with_lines(text: str, lines: tuple[str, ...] | list[str]) -> str:
    """`text` (a passwd or group file) with `lines` appended, each once."""
    present = set(text.splitlines())
    body = text if not text or text.endswith("\n") else text + "\n"
    return body + "".join(f"{line}\n" for line in dict.fromkeys(lines) if line not in present)


def account_env(account: Account) -> dict[str, str]:
    """What `getpass.getuser()` and friends read first."""
    return {"USER": account.name, "LOGNAME": account.name}


def _name_of(text: str, number: int) -> str | None:
    """The name whose third field is `number` in a passwd or group file, or None."""
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) >= 3 and fields[2].strip() == str(number) and fields[0]:
            return fields[0]
    return None
