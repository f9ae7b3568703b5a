"""A private Docker engine and a stand-in sandbox image for the `docker`-marked tests.

No registry is reachable from the development machine, so the real GPU image
(`sandbox/Dockerfile`) cannot be built here. Instead:

- the engine: Debian's `docker.io` is installed when `dockerd` is missing (root only; set
  KERNELARC_DOCKER_TESTS=0 to never install or start anything), and a private `dockerd` runs
  with its data root, exec root, pidfile and socket in a temp dir and `--bridge=none
  --iptables=false --ip-masq=false`, so the machine's network setup is left alone;
- the image: `docker import` of a tiny rootfs (a few directories, /etc/passwd with a non-root
  user) that borrows this host's Python by read-only bind mounts at the same paths (/usr, the
  interpreter's prefix, the venv and the checkout, for the editable kernelarc). The
  `extra_mounts` option of DockerSandbox exists for this only.

Everything is undone by `stop()`: containers removed, dockerd stopped by its pid, temp dir gone.
"""

import contextlib
import ctypes
import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors

import kernelarc

TEST_IMAGE = "kernelarc-sandbox-test:latest"
SANDBOX_LABEL = "kernelarc.sandbox"
_START_TIMEOUT_S = 60.0
#: Exec'd in a container: `pid uid args` per process but itself (vanished ones skipped).
_LIST_PROCESSES = """
import os
me = str(os.getpid())
for pid in os.listdir("/proc"):
    if not pid.isdigit() or pid == me:
        continue
    try:
        with open("/proc/" + pid + "/status") as status:
            uid = next(line.split()[1] for line in status if line.startswith("Uid:"))
        with open("/proc/" + pid + "/cmdline", "rb") as cmdline:
            args = cmdline.read().replace(b"\\0", b" ").strip().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        continue
    print(pid, uid, args.replace("\\n", " "))
"""


@dataclass
class DockerEngine:
    """A reachable engine plus the stand-in image and the mounts DockerSandbox needs for it."""

    host: str
    image_id: str
    python: str
    mounts: dict[str, str]
    client: docker.DockerClient
    env: dict[str, str] = field(default_factory=dict)
    """Environment the sandbox needs (PYTHONPATH: this checkout, whatever the venv points to)."""
    _proc: subprocess.Popen[bytes] | None = None
    _root: Path | None = None

    def sandbox_containers(self) -> list[str]:
        """Ids of every sandbox pool container on this engine, running or not."""
        found = self.client.containers.list(all=True, filters={"label": SANDBOX_LABEL})
        return [str(c.id) for c in found]

    def container_processes(self, container_id: str) -> list[tuple[int, str, str]]:
        """(pid, real uid, command line) of every process of a container, read from its own
        /proc by a python exec'd there as root (as DockerSandbox lists them: `docker top` is
        blind on some hosts). Its own exec is left out; it is a process of the container while
        it runs, so never call this while a sandbox checks that container for leftovers."""
        result = self.client.containers.get(container_id).exec_run(
            [self.python, "-I", "-S", "-c", _LIST_PROCESSES], user="0", workdir="/"
        )
        output = result.output.decode(errors="replace")
        assert result.exit_code == 0, f"listing in {container_id[:12]} failed: {output}"
        rows = [line.split(" ", 2) for line in output.splitlines()]
        assert rows, f"an empty listing of {container_id[:12]}: it must hold init at least"
        return [(int(pid), uid, args) for pid, uid, args in rows]

    def kill_in_container(self, container_id: str, pid: int, uid: str) -> None:
        """SIGKILL a process of a container from inside, as its own uid (root there has no
        CAP_KILL: the pool containers drop every capability)."""
        program = f"import os, signal; os.kill({pid}, signal.SIGKILL)"
        result = self.client.containers.get(container_id).exec_run(
            [self.python, "-I", "-S", "-c", program], user=uid, workdir="/"
        )
        output = result.output.decode(errors="replace")
        assert result.exit_code == 0, f"cannot kill {pid} as uid {uid}: {output}"

    def stop(self) -> None:
        """Remove leftover containers, stop our dockerd (if we started it), delete its dirs."""
        with contextlib.suppress(docker.errors.DockerException, OSError):
            for container in self.client.containers.list(all=True):
                container.remove(force=True)
        with contextlib.suppress(docker.errors.DockerException, OSError):
            self.client.close()
        if self._proc is not None:
            _stop_process(self._proc)
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)


def _stop_process(proc: "subprocess.Popen[bytes]") -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _install_docker() -> str | None:
    """Install docker.io with apt when allowed; None on success, else why not."""
    if os.geteuid() != 0:
        return "dockerd is not installed and the tests do not run as root (cannot apt-get)"
    if shutil.which("apt-get") is None:
        return "dockerd is not installed and there is no apt-get"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "docker.io"]):
        done = subprocess.run(cmd, env=env, capture_output=True, timeout=600, check=False)
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace")[-500:]
            return f"`{' '.join(cmd)}` failed (rc {done.returncode}): {tail}"
    return None if shutil.which("dockerd") else "docker.io installed but no dockerd on PATH"


def _die_with_parent() -> None:
    """In the child: SIGTERM when pytest dies, even by SIGKILL (PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM, 0, 0, 0)


def _start_dockerd(root: Path) -> tuple["subprocess.Popen[bytes]", str] | str:
    """Our own dockerd under `root`: (process, host URL) or why it could not start."""
    sock = root / "docker.sock"
    cmd = [
        "dockerd",
        "-H",
        f"unix://{sock}",
        f"--data-root={root / 'data'}",
        f"--exec-root={root / 'exec'}",
        f"--pidfile={root / 'docker.pid'}",
        "--bridge=none",
        "--iptables=false",
        "--ip-masq=false",
    ]
    log_path = root / "dockerd.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    host = f"unix://{sock}"
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if sock.exists():
            with contextlib.suppress(docker.errors.DockerException, OSError):
                client = docker.DockerClient(base_url=host)
                client.ping()
                client.close()
                return proc, host
        time.sleep(0.2)
    if proc.poll() is None:
        _stop_process(proc)
    tail = log_path.read_text(errors="replace")[-800:]
    return f"dockerd did not come up (rc {proc.returncode}); log tail:\n{tail}"


def _rootfs_tar() -> bytes:
    """A tiny rootfs: merged-/usr symlinks, /etc/passwd with uid 1000, empty mount points."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add(
            name: str, kind: bytes, mode: int = 0o755, data: bytes = b"", link: str = ""
        ) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.linkname, info.size = kind, mode, link, len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)

        # /sbin stays a real dir: docker's init is mounted at /sbin/docker-init.
        for name in ("etc", "usr", "root", "sbin", "work"):
            add(name, tarfile.DIRTYPE)
        add("tmp", tarfile.DIRTYPE, 0o1777)
        for name, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64")):
            add(name, tarfile.SYMTYPE, 0o777, link=target)
        passwd = b"root:x:0:0:root:/root:/bin/sh\nkernelarc:x:1000:1000::/work:/bin/sh\n"
        add("etc/passwd", tarfile.REGTYPE, 0o644, data=passwd)
        add("etc/group", tarfile.REGTYPE, 0o644, data=b"root:x:0:\nkernelarc:x:1000:\n")
    return buf.getvalue()


def _host_python_mounts() -> dict[str, str]:
    """Read-only mounts that let the image run this host's venv python with kernelarc."""
    paths = ["/usr", sys.base_prefix, sys.prefix, str(Path(kernelarc.__file__).parents[1])]
    if Path("/etc/ld.so.cache").exists():
        paths.append("/etc/ld.so.cache")
    for name in ("lib", "lib64", "bin"):  # hosts without merged /usr need these too
        path = Path("/") / name
        if path.is_dir() and not path.is_symlink():
            paths.append(str(path))
    unique = sorted({str(Path(p).resolve()) for p in paths})
    # A path already under another mount needs no mount of its own.
    kept = [p for p in unique if not any(p != q and p.startswith(q + "/") for q in unique)]
    return {p: p for p in kept}


def start_engine() -> DockerEngine | str:
    """A private engine with the stand-in image, or the reason the docker tests must skip."""
    if os.environ.get("KERNELARC_DOCKER_TESTS") == "0":
        return "KERNELARC_DOCKER_TESTS=0"
    if shutil.which("dockerd") is None:
        why = _install_docker()
        if why is not None:
            return why
    root = Path(tempfile.mkdtemp(prefix="kernelarc_dockerd_"))
    started = _start_dockerd(root)
    if isinstance(started, str):
        shutil.rmtree(root, ignore_errors=True)
        return started
    proc, host = started
    client = docker.DockerClient(base_url=host)
    checkout = str(Path(kernelarc.__file__).resolve().parents[1])
    engine = DockerEngine(
        host,
        "",
        sys.executable,
        _host_python_mounts(),
        client,
        {"PYTHONPATH": checkout},
        proc,
        root,
    )
    try:
        repository, tag = TEST_IMAGE.split(":")
        client.api.import_image_from_data(_rootfs_tar(), repository=repository, tag=tag)
        engine.image_id = str(client.images.get(TEST_IMAGE).id)
    except docker.errors.DockerException as exc:
        engine.stop()
        return f"cannot import the test image: {exc}"
    return engine
