"""How the local sandbox starts one runner: temp dir, identity, environment, command line, process.

Place in the flow: `LocalSandbox` starts every runner, spare or cold, through
`RunnerStart.spawn`, on the spawn thread (`spawn_thread.py`), as the identity it leased
(`runner_identities.py`); the process is a `RunnerProcess` (`runner_process.py`). The command
line is the runner's own, behind the `unshare` wrapper this host allows (`network.py`) and,
on a root host whose mount namespace works, the jail (`jail.py`, probed once per set-up): the
jailed runner gets its temp dir (handed to its uid), its identity's compile cache dir and its
account lines (`runner_accounts.py`). Where the jail or a namespace cannot be used the runner's
notes say so.
"""

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kernelarc.errors import SandboxError
from kernelarc.sandboxes import jail
from kernelarc.sandboxes.local.network import probe_isolation
from kernelarc.sandboxes.local.process_limits import (
    ResourceLimits,
    limits_preexec,
    package_root,
    scrubbed_env,
)
from kernelarc.sandboxes.local.runner_identities import Identity, Lease
from kernelarc.sandboxes.local.runner_process import RunnerProcess, start
from kernelarc.sandboxes.owned_dirs import make_owned_dir
from kernelarc.sandboxes.runner_accounts import host_account
from kernelarc.sandboxes.runner_cache import IdentityCaches, per_candidate_env

_JAIL_PROBE_TIMEOUT_S = 30.0


def _cuda_device_nodes() -> tuple[str, ...]:
    """The NVIDIA device nodes a CUDA runner opens (all GPUs: numbering differs from CUDA's)."""
    nodes = sorted(str(p) for p in Path("/dev").glob("nvidia*") if p.is_char_device())
    return tuple(n for n in nodes if not n.endswith(("-uvm-tools", "-modeset")))


@functools.cache
def _jail_failure(base: tuple[str, ...]) -> str | None:
    """Run the jail's probe once per set-up: None when it works, else why not."""
    probe_dir = Path(tempfile.mkdtemp(prefix="kernelarc_jail_probe_"))
    command = [*base, "--rw", str(probe_dir), "--probe"]
    try:
        done = subprocess.run(
            command, capture_output=True, timeout=_JAIL_PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip()[-500:]
        return f"exit {done.returncode}: {tail}"
    return None


@dataclass(frozen=True)
class RunnerStart:
    """What every runner of one LocalSandbox is started with (its options, fixed at its
    construction)."""

    python: str
    gpu: int
    network: bool
    jail: bool
    pid_namespace: bool
    extra_env: Mapping[str, str]
    per_candidate_jit: bool
    """Triton and Inductor cache into the runner's own dir (`runner_cache.per_candidate_env`),
    from where the host keeps them per candidate (`jit_cache.py`)."""
    identity_caches: IdentityCaches
    temp_root: Path
    resident_requests: int = 0
    """> 0: runners are resident judges serving up to this many requests (`--resident`)."""

    def spawn(
        self, device: str, timeout_s: float, lease: Lease, limits: ResourceLimits
    ) -> RunnerProcess:
        """Temp dir, identity (cache, account), environment, command line (jail or not), then
        the process itself (call it on the spawn thread).

        Raises:
            SandboxError: the temp dir, the jail's dirs or the process cannot be made.
        """
        try:
            workdir = make_owned_dir("eval", self.temp_root)  # swept if this host is killed
        except OSError as exc:
            msg = f"cannot create the sandbox temp dir: {exc}"
            raise SandboxError(msg) from exc
        try:
            notes: list[str] = []
            trace_notes: list[str] = []
            prefix, runner_command, jailed = self._command(
                device, lease.identity, notes, trace_notes
            )
            # Unjailed, the runner is this process's user, whatever identity it leased.
            uid, gid = lease.identity if jailed else (os.geteuid(), os.getegid())
            cache = self.identity_caches.folder(uid, gid)
            account = host_account(uid, gid, str(workdir))
            env = scrubbed_env(
                workdir=workdir,
                cache_dir=cache,
                device=device,
                gpu=self.gpu,
                account=account,
                extra=self.extra_env,
            )
            if self.per_candidate_jit:
                env.update(per_candidate_env(workdir))  # the candidate's own, staged per request
            command = [*prefix, *runner_command]
            if jailed:
                _hand_over(workdir, lease.identity)  # mkdtemp: mode 0700
                jail_args = ["--rw", str(workdir), "--rw", str(cache)]
                jail_args += [f"--passwd-line={line}" for line in account.passwd_lines]
                jail_args += [f"--group-line={line}" for line in account.group_lines]
                command = [*prefix, *jail_args, "--", *runner_command]
            runner = start(
                command,
                workdir=workdir,
                env=env,
                preexec=limits_preexec(limits),
                jailed=jailed,
                device=device,
                timeout_s=timeout_s,
                notes=notes,
                trace_notes=trace_notes,
                lease=lease,
            )
            runner.cache = cache
            runner.resident = self.resident_requests > 0
            return runner
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise

    def _command(
        self, device: str, identity: Identity, notes: list[str], trace_notes: list[str]
    ) -> tuple[list[str], list[str], bool]:
        """(what goes before the runner's own command line, the runner's command line, whether
        it runs in the jail); the jail's part still lacks its `--rw` dirs and account lines."""
        runner = [self.python, "-P", "-m", "kernelarc.runner", "--device", device]
        if self.resident_requests > 0:
            runner += ["--resident", str(self.resident_requests)]
        runner += ["request.json", "result.json"]
        if self.network:
            notes.append("no jail: network access was asked for (no namespaces)")
            return [], runner, False
        isolation = probe_isolation(pid_namespace=device != "cuda" and self.pid_namespace)
        if isolation.note:
            notes.append(isolation.note)
            if not isolation.network_isolated:
                trace_notes.append(isolation.note)
        jailed = self._jail_prefix(
            isolation.prefix, isolation.mount_namespace, device, identity, notes
        )
        if jailed is None:
            return list(isolation.prefix), runner, False
        return jailed, runner, True

    def _jail_prefix(
        self,
        prefix: tuple[str, ...],
        mount_namespace: bool,
        device: str,
        identity: Identity,
        notes: list[str],
    ) -> list[str] | None:
        if not self.jail:
            return None
        if os.geteuid() != 0 or not mount_namespace:
            notes.append("no jail: needs root and a mount namespace (`unshare -m`)")
            return None
        uid, gid = identity
        needs = [self.python, str(package_root())]
        needs += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if Path(self.python).resolve() == Path(sys.executable).resolve():
            needs += [sys.prefix, sys.base_prefix]
        opens = _cuda_device_nodes() if device == "cuda" else ()
        base = [*prefix, self.python, "-I", "-S", jail.__file__, "--uid", str(uid), "--gid"]
        base.append(str(gid))
        for path in dict.fromkeys(needs):
            base += ["--needs", path]
        for node in opens:
            base += ["--open", node]
        failure = _jail_failure(tuple(base))
        if failure is not None:
            notes.append(f"no jail: its probe failed: {failure}")
            return None
        return base


def _hand_over(folder: Path, identity: Identity) -> None:
    """Give the jail's user a writable dir (the host, root, still deletes it)."""
    uid, gid = identity
    folder.mkdir(parents=True, exist_ok=True)
    try:
        if folder.stat().st_uid == uid:
            return
        os.chown(folder, uid, gid)
        for path in folder.rglob("*"):
            os.chown(path, uid, gid, follow_symlinks=False)
    except OSError as exc:
        msg = f"cannot give {folder} to the sandbox user {uid}:{gid}: {exc}"
        raise SandboxError(msg) from exc
