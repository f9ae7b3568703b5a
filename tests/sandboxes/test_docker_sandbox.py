"""DockerSandbox end to end on a private dockerd (see docker_env.py): real containers, CPU.

One sandbox runs a fixed sequence of candidates through its warm `cpu` container (each
evaluation costs a torch import inside the runner, so the sequence is shared by the tests), then
is closed; the tests check what each step returned, which container it ran in and whether it
used the container's warm spare runner.
"""

import inspect
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from docker_env import DockerEngine

from kernelarc.errors import ConfigError, SandboxError
from kernelarc.problems.files import load_problem
from kernelarc.sandboxes import make_sandbox
from kernelarc.sandboxes.docker import DockerSandbox
from kernelarc.sandboxes.docker.attach_stream import TAIL_BYTES, AttachStream
from kernelarc.sandboxes.runner_lifecycle import WARM_SPARE_NOTE
from kernelarc.schema import EvalRequest, EvalResult, EvalStatus, Solution, TimingConfig

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
#: Correct, but leaves a daemon (fork, setsid, fork, exec) sleeping in the container.
DAEMON = SAMPLES / "hostile" / "double_fork_daemon" / "kernel.py"
TIMEOUT_S = 180.0
#: A private dockerd and a sequence of container evaluations: minutes in all.
pytestmark = pytest.mark.slow
ENDLESS_TIMEOUT_S = 15.0


class _CountingServer:
    """A TCP server on every host address that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("0.0.0.0", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.close()

    def addresses(self) -> str:
        hosts = ["127.0.0.1"]
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            probe.connect(("10.255.255.255", 1))  # no packet is sent: just picks the route
            hosts.append(probe.getsockname()[0])
        except OSError:
            pass
        finally:
            probe.close()
        return ",".join(f"{h}:{self.port}" for h in dict.fromkeys(hosts))

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def _request(kernel: Path, replacements: dict[str, str] | None = None) -> EvalRequest:
    prob = load_problem(SAMPLES / "problems" / "vector_add")
    source = kernel.read_text()
    for old, new in (replacements or {}).items():
        source = source.replace(old, new)
    solution = Solution.model_validate(
        {
            "name": kernel.stem,
            "definition": prob.definition.name,
            "author": "tests",
            "spec": {
                "languages": ["pytorch"],
                "target_hardware": ["LOCAL"],
                "entry_point": f"{kernel.name}::run",
                "destination_passing_style": False,
            },
            "sources": [{"path": kernel.name, "content": source}],
        }
    )
    return EvalRequest(
        definition=prob.definition,
        workloads=list(prob.workloads)[:1],
        solution=solution,
        correctness_rounds=1,
        timing=TimingConfig(warmup=0, iterations=1),
        problem_dir=str(prob.path),
    )


@dataclass(frozen=True)
class Step:
    result: EvalResult
    container_before: str | None
    container_after: str | None

    @property
    def statuses(self) -> set[EvalStatus]:
        return {t.evaluation.status for t in self.result.traces if t.evaluation is not None}

    @property
    def log(self) -> str:
        evaluation = self.result.traces[0].evaluation
        assert evaluation is not None
        return evaluation.log

    @property
    def warm(self) -> bool:
        return any(n.startswith(WARM_SPARE_NOTE) for n in self.result.sandbox_notes)


@dataclass(frozen=True)
class Sequence:
    steps: dict[str, Step]
    containers_before_close: list[str]
    containers_after_close: list[str]
    server_accepted: int
    spare_killed: bool


def _spare_runners(sandbox: DockerSandbox, docker_engine: DockerEngine) -> list[tuple[int, str]]:
    """(pid, uid) of the spare runner waiting in the `cpu` container (its own pid numbers)."""
    container_id = sandbox.container_id("cpu")
    if container_id is None:
        return []
    processes = docker_engine.container_processes(container_id)
    return [(pid, uid) for pid, uid, args in processes if "kernelarc.runner --device cpu" in args]


def _kill_spare(sandbox: DockerSandbox, docker_engine: DockerEngine) -> bool:
    """SIGKILL the spare (a test's stand-in for a spare that died) from inside the container,
    as its own uid, and wait until the container no longer has it; False if none appeared.
    The spare is exec'd as the evaluation ends; on a loaded host `docker top` may list it only a
    moment later, so it is waited for first."""
    container_id = sandbox.container_id("cpu")
    appear_by = time.monotonic() + 30.0
    spares = _spare_runners(sandbox, docker_engine)
    while not spares and time.monotonic() < appear_by:
        time.sleep(0.1)
        spares = _spare_runners(sandbox, docker_engine)
    for pid, uid in spares:
        assert container_id is not None
        docker_engine.kill_in_container(container_id, pid, uid)
    deadline = time.monotonic() + 30.0
    while _spare_runners(sandbox, docker_engine) and time.monotonic() < deadline:
        time.sleep(0.1)
    return bool(spares)


@pytest.fixture(scope="module")
def sequence(docker_engine: DockerEngine) -> Sequence:
    server = _CountingServer()
    plan = [  # step name, kernel file, placeholder values, timeout
        ("first", SAMPLES / "kernels" / "add_return.py", None, TIMEOUT_S),
        ("endless", SAMPLES / "kernels" / "add_endless.py", None, ENDLESS_TIMEOUT_S),
        (
            "net_probe",
            SAMPLES / "docker" / "net_probe.py",
            {"__HOSTS__": server.addresses()},
            TIMEOUT_S,
        ),
        ("kill_runner", SAMPLES / "docker" / "kill_runner.py", None, TIMEOUT_S),
        ("daemon", DAEMON, {"__MARKER__": "kernelarc-docker-test-daemon"}, TIMEOUT_S),
        ("worker_exit", SAMPLES / "kernels" / "add_exit.py", None, TIMEOUT_S),
        ("readonly_probe", SAMPLES / "docker" / "readonly_probe.py", None, TIMEOUT_S),
    ]
    steps: dict[str, Step] = {}
    try:
        with DockerSandbox(
            image=docker_engine.image_id,
            docker_host=docker_engine.host,
            python=docker_engine.python,
            extra_mounts=docker_engine.mounts,
            extra_env=docker_engine.env,
            memory_limit_gb=8.0,
            pids_limit=1024,
            cpus=2.0,
            resident_requests=0,  # the container's own checks under test: one-off runners
        ) as sandbox:
            for name, kernel, replacements, timeout in plan:
                before = sandbox.container_id("cpu")
                result = sandbox.evaluate(_request(kernel, replacements), timeout_s=timeout)
                steps[name] = Step(result, before, sandbox.container_id("cpu"))
            spare_killed = _kill_spare(sandbox, docker_engine)
            before = sandbox.container_id("cpu")
            result = sandbox.evaluate(
                _request(SAMPLES / "kernels" / "add_return.py"), timeout_s=TIMEOUT_S
            )
            steps["after_spare_death"] = Step(result, before, sandbox.container_id("cpu"))
            containers_before_close = docker_engine.sandbox_containers()
        containers_after_close = docker_engine.sandbox_containers()
    finally:
        server.close()
    return Sequence(
        steps, containers_before_close, containers_after_close, server.accepted, spare_killed
    )


@pytest.mark.docker
def test_correct_candidate_passes_and_traces_name_the_image(
    sequence: Sequence, docker_engine: DockerEngine
) -> None:
    step = sequence.steps["first"]
    assert step.statuses == {EvalStatus.PASSED}, step.log
    assert step.container_before is None and step.container_after is not None
    assert step.result.sandbox == "docker"
    assert step.result.sandbox_image == docker_engine.image_id
    assert any(note.startswith("started container") for note in step.result.sandbox_notes)
    for trace in step.result.traces:
        assert trace.evaluation is not None
        assert trace.evaluation.environment.libs["sandbox_image"] == docker_engine.image_id
        assert "torch" in trace.evaluation.environment.libs


@pytest.mark.docker
def test_an_endless_loop_is_ended_by_the_judge_and_the_container_kept(sequence: Sequence) -> None:
    """The judge ends a hung workload before the sandbox's own timeout would (it knows that
    timeout from the request, issue 17) and kills the worker with the child it started, so
    nothing outlives the runner and the container is kept."""
    endless, after = sequence.steps["endless"], sequence.steps["net_probe"]
    assert endless.statuses == {EvalStatus.TIMEOUT}, endless.log
    assert "overran its deadline" in endless.log
    assert "the end of the overall timeout of 15 s" in endless.log
    assert endless.result.traces[0].evaluation is not None
    assert "sandbox_image" in endless.result.traces[0].evaluation.environment.libs
    assert endless.container_before == sequence.steps["first"].container_after
    assert endless.container_after == endless.container_before
    assert not any("replaced" in note for note in endless.result.sandbox_notes)
    assert after.container_before == endless.container_after
    assert after.statuses == {EvalStatus.PASSED}, after.log


@pytest.mark.docker
def test_candidate_has_no_network(sequence: Sequence) -> None:
    step = sequence.steps["net_probe"]
    assert step.statuses == {EvalStatus.PASSED}, step.log  # saw only `lo`, connected nowhere
    assert sequence.server_accepted == 0


@pytest.mark.docker
def test_killed_runner_is_runtime_error_and_the_next_candidate_is_unaffected(
    sequence: Sequence,
) -> None:
    killed, after = sequence.steps["kill_runner"], sequence.steps["daemon"]
    assert killed.statuses == {EvalStatus.RUNTIME_ERROR}, killed.log
    assert "no result file" in killed.log
    assert killed.container_after is None
    assert any("replaced: runner crashed" in note for note in killed.result.sandbox_notes)
    assert after.container_before is None  # a fresh container, started for it
    assert after.statuses == {EvalStatus.PASSED}, after.log


@pytest.mark.docker
def test_a_process_left_behind_is_seen_and_its_container_replaced(sequence: Sequence) -> None:
    """The leftover check lists the container's processes for real: a blind listing would
    keep the container (or, being empty, replace it for another reason)."""
    daemon, after = sequence.steps["daemon"], sequence.steps["worker_exit"]
    assert daemon.statuses == {EvalStatus.PASSED}, daemon.log
    replaced = [n for n in daemon.result.sandbox_notes if "replaced" in n]
    assert len(replaced) == 1, daemon.result.sandbox_notes
    assert replaced[0].endswith("process(es) outlived the runner"), replaced
    assert daemon.container_after is None
    assert after.container_before is None and after.container_after is not None


@pytest.mark.docker
def test_worker_exit_keeps_the_container_and_the_root_is_read_only(sequence: Sequence) -> None:
    worker_exit, probe = sequence.steps["worker_exit"], sequence.steps["readonly_probe"]
    # A candidate that only ends its own worker (os._exit(3)) leaves the runner in charge.
    assert worker_exit.statuses == {EvalStatus.RUNTIME_ERROR}, worker_exit.log
    assert "code 3" in worker_exit.log
    assert probe.container_before == worker_exit.container_after == probe.container_after
    assert probe.statuses == {EvalStatus.PASSED}, probe.log  # EROFS on /usr, /, /etc; /tmp ok


@pytest.mark.docker
def test_a_kept_container_gives_the_next_candidate_its_warm_spare(sequence: Sequence) -> None:
    steps = sequence.steps
    # A fresh container (first step, or after a replacement): a runner exec'd on demand.
    for name in ("first", "daemon", "worker_exit"):
        assert not steps[name].warm, name
    # After an evaluation that kept its container: the spare exec'd when that one ended,
    # including the one after the endless loop, which the judge ended (TIMEOUT above).
    for name in ("endless", "net_probe", "kill_runner", "readonly_probe"):
        assert steps[name].warm, (name, steps[name].result.sandbox_notes)


@pytest.mark.docker
def test_a_dead_spare_is_replaced_by_a_cold_start(sequence: Sequence) -> None:
    step = sequence.steps["after_spare_death"]
    assert sequence.spare_killed
    assert not step.warm
    assert step.statuses == {EvalStatus.PASSED}, step.log
    assert step.container_before == sequence.steps["readonly_probe"].container_after


@pytest.mark.docker
def test_close_removes_every_container(sequence: Sequence) -> None:
    assert len(sequence.containers_before_close) == 1
    assert sequence.containers_after_close == []


@pytest.mark.docker
def test_make_sandbox_builds_docker_and_rejects_bad_options(docker_engine: DockerEngine) -> None:
    sandbox = make_sandbox(
        "docker",
        image="kernelarc-sandbox-test:latest",
        gpu=0,
        memory_limit_gb=4.0,
        pids_limit=256,
        cpus=1.0,
        docker_host=docker_engine.host,
    )
    assert isinstance(sandbox, DockerSandbox)
    sandbox.close()
    with pytest.raises(ConfigError, match="bad options"):
        make_sandbox("docker", docker_host=docker_engine.host, no_such_option=1)


def test_unreachable_engine_is_a_sandbox_error(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="no Docker engine"):
        DockerSandbox(docker_host=f"unix://{tmp_path}/missing.sock")


def test_docker_config_options_are_sandbox_options() -> None:
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from kernelarc.config import register_configs

    register_configs()
    with initialize_config_module(config_module="kernelarc.conf", version_base=None):
        composed = compose(
            config_name="campaign", overrides=["sandbox=docker", "sandbox.docker.cpus=4"]
        )
    cfg = OmegaConf.to_object(composed)
    options = cfg.sandbox.options()  # type: ignore[attr-defined]
    assert cfg.sandbox.kind == "docker"  # type: ignore[attr-defined]
    assert options["image"] == "kernelarc-sandbox:latest"
    assert options["cpus"] == 4.0
    accepted = set(inspect.signature(DockerSandbox.__init__).parameters) - {"self"}
    assert set(options) <= accepted


def test_eval_with_docker_and_no_engine_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kernelarc.cli import main

    solution = tmp_path / "solution.json"
    solution.write_text(_request(SAMPLES / "kernels" / "add_return.py").solution.model_dump_json())
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/missing.sock")
    args = ["eval", str(SAMPLES / "problems" / "vector_add"), "--solution", str(solution)]
    assert main([*args, "--sandbox", "docker", "--device", "cpu", "--image", "x:y"]) == 2
    assert "no Docker engine" in capsys.readouterr().err


def test_attach_stream_reassembles_split_frames_and_caps_tails() -> None:
    def frame(kind: int, payload: bytes) -> bytes:
        return bytes([kind, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload

    data = frame(2, b"runner: start\n") + frame(1, b"printed\n")
    data += b"".join(frame(2, b"x" * 1000) for _ in range(200)) + frame(2, b"\nrunner: end\n")
    stream = AttachStream()
    for i in range(0, len(data), 7):  # frames split at arbitrary byte boundaries
        stream.feed(data[i : i + 7])
    log = stream.log()
    assert log.rstrip().endswith("printed")  # stdout follows the stderr tail
    assert "runner: end" in log and "runner: start" not in log  # 200 kB of stderr: head cut
    assert len(stream.stderr) <= 2 * TAIL_BYTES


HOSTILE_IN_CONTAINER = """
import os, signal, time
from pathlib import Path

_won = []
_done = False


def _parent(pid):
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _line(pid):
    # pid and its ancestors up to the exec'd process (whose parent is outside: 0)
    found = [pid]
    while pid > 1:
        pid = _parent(pid)
        found.append(pid)
    return found


def _attack():
    here = Path.cwd().resolve()
    judge = [p for p in _line(os.getpid()) if p > 0][-1]  # its evaluation's exec'd judge
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            runner = b"kernelarc.runner" in (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if not runner or judge in _line(pid):
            continue  # the container's init, or its own evaluation (that only fails itself)
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            try:
                os.kill(pid, sig)
                _won.append(f"signal {sig} to {pid}")
            except OSError:
                pass
    try:
        folders = list(Path("/work/eval").iterdir())
    except OSError:  # mode 0711: no listing (the other dirs have random names)
        folders = []
    for folder in folders:
        if folder.resolve() != here:
            try:
                (folder / "request.json").write_text("planted")
                _won.append(f"wrote into {folder}")
            except OSError:
                pass


def run(x, y):
    global _done
    if not _done:
        _done = True
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline:
            _attack()
            time.sleep(0.05)
    return x - y if _won else x + y
"""


def _runner_uids(sandbox: DockerSandbox, docker_engine: DockerEngine) -> set[str]:
    """The uids of the `kernelarc.runner` processes in the `cpu` container now."""
    container_id = sandbox.container_id("cpu")
    if container_id is None:
        return set()
    processes = docker_engine.container_processes(container_id)
    return {uid for _, uid, args in processes if "kernelarc.runner --device cpu" in args}


@pytest.mark.docker
@pytest.mark.skipif(os.geteuid() != 0, reason="runners alternate users only on a root host")
def test_a_spare_beside_a_hostile_candidate_runs_as_the_other_user_and_survives(
    docker_engine: DockerEngine, tmp_path: Path
) -> None:
    """The cuda rule forced on CPU: the spare is exec'd while the candidate runs, as the other
    uid; the candidate's attacks (signals to every runner process outside its own evaluation,
    files into every other eval dir) all fail; the spare is not a leftover, and the next
    evaluation uses it."""
    kernel = tmp_path / "hostile.py"
    kernel.write_text(HOSTILE_IN_CONTAINER)
    seen: list[set[str]] = []
    with DockerSandbox(
        image=docker_engine.image_id,
        docker_host=docker_engine.host,
        python=docker_engine.python,
        extra_mounts=docker_engine.mounts,
        extra_env=docker_engine.env,
        spare_start="concurrent",
        resident_requests=0,  # a spare beside a running candidate: one-off runners
    ) as sandbox:
        first = sandbox.evaluate(
            _request(SAMPLES / "kernels" / "add_return.py"), timeout_s=TIMEOUT_S
        )
        done = threading.Event()

        def watch() -> None:
            # Until both runners are seen: the watch's own listing, a root process in the
            # container, must be gone before the evaluation's leftover check.
            while not done.is_set() and {"1000", "1001"} not in seen:
                seen.append(_runner_uids(sandbox, docker_engine))
                time.sleep(0.1)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            attacked = sandbox.evaluate(_request(kernel), timeout_s=TIMEOUT_S)
        finally:
            done.set()
            watcher.join()
        container = sandbox.container_id("cpu")
        last = sandbox.evaluate(
            _request(SAMPLES / "kernels" / "add_return.py"), timeout_s=TIMEOUT_S
        )
        last_container = sandbox.container_id("cpu")
    steps = [Step(r, None, None) for r in (first, attacked, last)]
    assert [s.statuses for s in steps] == [{EvalStatus.PASSED}] * 3, [s.log for s in steps]
    assert {"1000", "1001"} in seen, seen
    assert steps[1].warm and steps[2].warm
    assert container == last_container  # the spare was no leftover: the container was kept


@pytest.mark.docker
@pytest.mark.skipif(os.geteuid() != 0, reason="runners alternate users only on a root host")
def test_both_runner_users_are_accounts_though_the_image_lacks_one(
    docker_engine: DockerEngine,
) -> None:
    """The stand-in image has a passwd entry for uid 1000 only; runners alternate between
    1000:1000 and 1001:1001. A candidate that asks who it is (getpass, pwd, grp, HOME, the
    compile cache dirs) passes under both, and each user's cache outlives its runner."""
    who = SAMPLES / "kernels" / "add_asks_who_it_is.py"
    options = {**_sandbox_options(docker_engine), "resident_requests": 0}  # users alternate
    with DockerSandbox(**options) as sandbox:  # type: ignore[arg-type]
        results = [sandbox.evaluate(_request(who), timeout_s=TIMEOUT_S) for _ in range(3)]
        pool = sandbox._slots["cpu"].pool_dir
        assert pool is not None
        seen = {
            user: (pool / "cache" / f"{user}-{user}" / "seen.txt").read_text().split()
            for user in ("1000", "1001")
        }
    steps = [Step(r, None, None) for r in results]
    assert [s.statuses for s in steps] == [{EvalStatus.PASSED}] * 3, [s.log for s in steps]
    assert seen == {"1000": ["1000", "1000"], "1001": ["1001"]}


def _sandbox_options(docker_engine: DockerEngine) -> dict[str, object]:
    return {
        "image": docker_engine.image_id,
        "docker_host": docker_engine.host,
        "python": docker_engine.python,
        "extra_mounts": docker_engine.mounts,
        "extra_env": docker_engine.env,
    }


def _wait_for_container(sandbox: DockerSandbox) -> str:
    deadline = time.monotonic() + TIMEOUT_S
    while (container := sandbox.container_id("cpu")) is None:
        assert time.monotonic() < deadline, "prepare started no container"
        time.sleep(0.1)
    return container


@pytest.mark.docker
def test_prepare_starts_the_container_and_a_spare_for_the_first_candidate(
    docker_engine: DockerEngine,
) -> None:
    """`prepare` starts the slot's container and its first spare on a thread of its own; the
    first evaluation runs warm in that container (it started none itself)."""
    request = _request(SAMPLES / "kernels" / "add_return.py")
    with DockerSandbox(**_sandbox_options(docker_engine)) as sandbox:  # type: ignore[arg-type]
        sandbox.prepare("cpu", TIMEOUT_S, request.problem_dir)
        prepared = _wait_for_container(sandbox)
        step = Step(sandbox.evaluate(request, timeout_s=TIMEOUT_S), prepared, None)
        assert sandbox.container_id("cpu") == prepared
    assert step.statuses == {EvalStatus.PASSED}, step.log
    assert step.warm, step.result.sandbox_notes
    assert not any(n.startswith("started container") for n in step.result.sandbox_notes)
    assert prepared not in docker_engine.sandbox_containers()


_DOCKER_HOST = """
import json, sys, time
from kernelarc.sandboxes.docker import DockerSandbox
options, problem_dir = json.loads(sys.argv[1]), sys.argv[2]
sandbox = DockerSandbox(**options)
sandbox.prepare("cpu", 180, problem_dir)
while sandbox.container_id("cpu") is None:
    time.sleep(0.1)
print(sandbox.container_id("cpu"), flush=True)
time.sleep(600)
"""


@pytest.mark.docker
def test_a_killed_hosts_pool_dir_and_container_are_removed_by_the_next_sandbox(
    docker_engine: DockerEngine,
) -> None:
    """A host process SIGKILLed with a prepared container runs no close(): its pool dir and
    container stay until a DockerSandbox is created, which removes both; the live sandbox of
    this process (made before the kill) keeps its own."""
    request = _request(SAMPLES / "kernels" / "add_return.py")
    options = _sandbox_options(docker_engine)
    root = Path(tempfile.gettempdir())
    host = subprocess.Popen(
        [sys.executable, "-c", _DOCKER_HOST, json.dumps(options), str(request.problem_dir)],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        with DockerSandbox(**options) as live:  # type: ignore[arg-type]
            live.prepare("cpu", TIMEOUT_S, request.problem_dir)
            live_container = _wait_for_container(live)
            assert host.stdout is not None
            dead_container = host.stdout.readline().decode().strip()
            assert dead_container
            host.kill()
            host.wait()
            left = sorted(root.glob(f"kernelarc_pool_{host.pid}-*"))
            assert len(left) == 1
            assert dead_container in docker_engine.sandbox_containers()

            DockerSandbox(**options).close()  # type: ignore[arg-type]

            assert not left[0].exists()
            remaining = docker_engine.sandbox_containers()
            assert dead_container not in remaining
            assert live_container in remaining
            step = Step(live.evaluate(request, timeout_s=TIMEOUT_S), live_container, None)
            assert step.statuses == {EvalStatus.PASSED}, step.log
            assert step.warm
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        for folder in root.glob(f"kernelarc_pool_{host.pid}-*"):  # a failed sweep's leftover
            subprocess.run(["rm", "-rf", str(folder)], check=False)


FORK_BOMB = SAMPLES / "hostile" / "fork_bomb" / "kernel.py"
#: As the hostile suite's Docker pool: a bomb spends this limit within milliseconds.
BOMB_PIDS_LIMIT = 128


def _bomb_then_control(
    docker_engine: DockerEngine, spare_start: str
) -> tuple[EvalResult, str | None, list[tuple[int, str, str]], EvalResult]:
    """The fork bomb (3 s workload budget), the container's processes right after it returned
    (none when it was replaced), then an honest candidate in the same sandbox."""
    bomb = _request(FORK_BOMB).model_copy(update={"workload_timeout_s": 3.0})
    with DockerSandbox(
        **_sandbox_options(docker_engine),  # type: ignore[arg-type]
        pids_limit=BOMB_PIDS_LIMIT,
        spare_start=spare_start,  # type: ignore[arg-type]
    ) as sandbox:
        result = sandbox.evaluate(bomb, timeout_s=TIMEOUT_S)
        container = sandbox.container_id("cpu")
        processes = docker_engine.container_processes(container) if container else []
        control = sandbox.evaluate(
            _request(SAMPLES / "kernels" / "add_return.py"), timeout_s=TIMEOUT_S
        )
    return result, container, processes, control


@pytest.mark.docker
def test_a_fork_bomb_leaves_its_container_empty_before_the_next_runner(
    docker_engine: DockerEngine,
) -> None:
    """Issue 17: the bomb is TIMEOUT; when its container is kept, it holds nothing of the bomb
    by the time evaluate() returns (init, `sleep infinity` and the one spare runner exec'd
    after the check, still waiting for `go`: its zygote is forked only then), and the next
    candidate passes there."""
    result, container, processes, control = _bomb_then_control(docker_engine, "after")
    bomb = Step(result, None, None)
    assert bomb.statuses == {EvalStatus.TIMEOUT}, bomb.log
    assert Step(control, None, None).statuses == {EvalStatus.PASSED}, control.traces
    if container is None:  # replaced: a fresh container has nothing of the bomb either
        assert any("replaced" in n for n in result.sandbox_notes), result.sandbox_notes
        return
    others = [p for p in processes if p[0] != 1 and p[2] != "sleep infinity"]
    assert len(others) == 1, processes
    assert "kernelarc.runner --device cpu" in others[0][2], processes


@pytest.mark.docker
@pytest.mark.skipif(os.geteuid() != 0, reason="runners alternate users only on a root host")
def test_a_spare_exec_d_beside_a_fork_bomb_goes_with_its_container(
    docker_engine: DockerEngine,
) -> None:
    """The pids limit is the container's, whatever the uid: a spare exec'd while the bomb ran
    (the cuda rule, forced here) may have had its own forks or threads refused during its torch
    import. The container is replaced, so the next candidate gets a fresh runner and passes."""
    result, container, _, control = _bomb_then_control(docker_engine, "concurrent")
    bomb = Step(result, None, None)
    assert bomb.statuses == {EvalStatus.TIMEOUT}, bomb.log
    assert container is None, result.sandbox_notes
    replaced = [n for n in result.sandbox_notes if "replaced" in n]
    assert len(replaced) == 1, result.sandbox_notes
    after = Step(control, None, None)
    assert after.statuses == {EvalStatus.PASSED}, after.log
    assert not after.warm


@pytest.mark.docker
def test_a_resident_judge_keeps_the_problem_and_sweeps_what_a_candidate_left(
    docker_engine: DockerEngine,
) -> None:
    """The default (`resident_requests`): one runner judges the requests of the problem in
    turn, from its cache after the first; a daemon a candidate left is killed by the judge
    before its result is complete, so the container is kept and the next request still goes
    to the same judge."""
    options = {**_sandbox_options(docker_engine), "memory_limit_gb": 8.0, "pids_limit": 1024}
    with DockerSandbox(**options) as sandbox:  # type: ignore[arg-type]
        add = SAMPLES / "kernels" / "add_return.py"
        first = sandbox.evaluate(_request(add), timeout_s=TIMEOUT_S)
        container = sandbox.container_id("cpu")
        daemon = sandbox.evaluate(
            _request(DAEMON, {"__MARKER__": "kernelarc-resident-daemon"}), timeout_s=TIMEOUT_S
        )
        after = sandbox.evaluate(_request(add), timeout_s=TIMEOUT_S)
        kept = sandbox.container_id("cpu")
    statuses = [
        {t.evaluation.status for t in r.traces if t.evaluation is not None}
        for r in (first, daemon, after)
    ]
    assert statuses == [{EvalStatus.PASSED}] * 3, after.stderr_tail[-2000:]
    assert [r.resident_request for r in (first, daemon, after)] == [1, 2, 3]
    assert after.judge_cache.get("reference_hits", 0) > 0
    assert "reference_misses" not in after.judge_cache
    assert "killed" in daemon.stderr_tail and "left behind" in daemon.stderr_tail
    assert kept == container  # nothing outlived the candidate: the container stays
