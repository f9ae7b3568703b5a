"""The hostile-candidate suite (issue #4): samples, their expectations, and host-state probes.

Every folder of tests/samples/hostile/ is one candidate for the `vector_add` sample problem
(workloads add-n16 and add-n1000): its files, except `expect.json`, are the solution's sources
(entry `kernel.py::run`, return style). `expect.json` says what the sample must get:

    status              one EvalStatus for every workload, or a list with one per workload
    log                 a phrase the first workload's log must contain ("" for none)
    property            what must hold afterwards, a key of PROPERTIES
    device              "cpu" (default) or "cuda" (run only by the gpu-marked test)
    workload_timeout_s  the per-workload budget (default WORKLOAD_TIMEOUT_S)
    why                 one line: what the sample tries

Sources may hold two placeholders, replaced per run: `__MARKER__` (a string unique to the run
and the sample, which samples put in the command lines of processes they leave behind) and
`__PORT__` (the port of the test's TCP listener on the host).

`HostWatch` sets up what the suite must leave untouched (canary files under /tmp, $HOME,
/var/tmp and /dev/shm; a TCP listener on every host address; a fake API key in the host
environment) and reports what changed. `run_suite` evaluates samples through a pool of
sandboxes; a sample whose property is `next_candidate_unaffected` is followed, in the same
sandbox (so the same Docker slot), by an honest control candidate.
"""

import json
import os
import queue
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kernelarc.problems.files import load_problem
from kernelarc.sandboxes import Sandbox
from kernelarc.sandboxes.result_file import LOG_CAP_BYTES
from kernelarc.schema import EvalRequest, EvalResult, EvalStatus, Solution, TimingConfig

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
HOSTILE = SAMPLES / "hostile"
PROBLEM = SAMPLES / "problems" / "vector_add"
EXPECT_FILE = "expect.json"
WORKLOAD_TIMEOUT_S = 15.0
SANDBOX_TIMEOUT_S = 120.0
#: The environment variable every sandboxed process of a suite run carries (see HostWatch).
TOKEN_VAR = "KERNELARC_HOSTILE_RUN"
SECRET_VAR = "KERNELARC_HOSTILE_TEST_API_KEY"
#: A second copy of the secret under a name no secret filter would catch: only an allowlist does.
PLAIN_VAR = "KERNELARC_HOSTILE_PLAIN_SETTING"
CONTROL_SOURCE = "def run(x, y):\n    return x + y\n"


@dataclass(frozen=True)
class Expectation:
    """The parsed `expect.json` of one sample."""

    statuses: tuple[EvalStatus, ...]
    """Per workload, in the problem's workload order."""
    log: str
    """A phrase of the first workload's log ("" = not checked)."""
    property: str
    """The key of PROPERTIES that must hold afterwards."""
    device: str
    """cpu or cuda."""
    workload_timeout_s: float
    """Per-workload budget given to the judge."""
    why: str
    """What the sample tries."""


@dataclass(frozen=True)
class Sample:
    """One hostile candidate."""

    name: str
    folder: Path
    expect: Expectation


def _expectation(path: Path, workloads: int) -> Expectation:
    data = json.loads(path.read_text())
    status = data["status"]
    statuses = [status] * workloads if isinstance(status, str) else list(status)
    if len(statuses) != workloads:
        msg = f"{path}: `status` needs one entry per workload ({workloads})"
        raise ValueError(msg)
    prop = data["property"]
    if prop not in PROPERTIES:
        msg = f"{path}: unknown property {prop!r}; known: {sorted(PROPERTIES)}"
        raise ValueError(msg)
    return Expectation(
        statuses=tuple(EvalStatus(s) for s in statuses),
        log=data.get("log", ""),
        property=prop,
        device=data.get("device", "cpu"),
        workload_timeout_s=float(data.get("workload_timeout_s", WORKLOAD_TIMEOUT_S)),
        why=data["why"],
    )


def load_samples(device: str = "cpu") -> list[Sample]:
    """Every sample for `device`, by name."""
    workloads = len(load_problem(PROBLEM).workloads)
    samples = []
    for folder in sorted(p for p in HOSTILE.iterdir() if p.is_dir()):
        expect = _expectation(folder / EXPECT_FILE, workloads)
        if expect.device == device:
            samples.append(Sample(folder.name, folder, expect))
    return samples


def _solution(name: str, sources: list[dict[str, str]], language: str) -> Solution:
    return Solution.model_validate(
        {
            "name": name,
            "definition": "vector_add_f32",
            "author": "tests",
            "spec": {
                "languages": [language],
                "target_hardware": ["LOCAL"],
                "entry_point": "kernel.py::run",
                "destination_passing_style": False,
            },
            "sources": sources,
        }
    )


def _request(solution: Solution, device: str, workload_timeout_s: float) -> EvalRequest:
    prob = load_problem(PROBLEM)
    return EvalRequest(
        definition=prob.definition,
        workloads=list(prob.workloads),
        solution=solution,
        device=device,
        correctness_rounds=2,
        timing=TimingConfig(warmup=1, iterations=3),
        workload_timeout_s=workload_timeout_s,
        problem_dir=str(prob.path),
    )


def sample_request(
    sample: Sample, *, marker: str, port: int, device: str | None = None
) -> EvalRequest:
    """The sample as an EvalRequest, placeholders filled in (on `device`, default its own)."""
    sources = []
    for path in sorted(sample.folder.rglob("*")):
        if not path.is_file() or path.name == EXPECT_FILE:
            continue
        content = path.read_text().replace("__MARKER__", marker).replace("__PORT__", str(port))
        sources.append({"path": path.relative_to(sample.folder).as_posix(), "content": content})
    language = "triton" if "import triton" in sources[0]["content"] else "pytorch"
    solution = _solution(sample.name, sources, language)
    return _request(solution, device or sample.expect.device, sample.expect.workload_timeout_s)


def candidate_request(name: str, source: str, device: str = "cpu") -> EvalRequest:
    """A `vector_add` candidate whose `kernel.py` is `source` (a PyTorch solution)."""
    solution = _solution(name, [{"path": "kernel.py", "content": source}], "pytorch")
    return _request(solution, device, WORKLOAD_TIMEOUT_S)


def control_request(device: str = "cpu") -> EvalRequest:
    """An honest candidate: what runs right after a sample to show the sandbox still works."""
    solution = _solution("control", [{"path": "kernel.py", "content": CONTROL_SOURCE}], "pytorch")
    return _request(solution, device, WORKLOAD_TIMEOUT_S)


# --- host probes -----------------------------------------------------------------------------


def processes_with(needle: str) -> list[str]:
    """`pid: cmdline` of every process whose command line or environment contains `needle`."""
    found = []
    data = needle.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        blobs = []
        for name in ("cmdline", "environ"):
            try:
                blobs.append((entry / name).read_bytes())
            except OSError:
                continue
        if any(data in blob for blob in blobs):
            cmdline = blobs[0].replace(b"\0", b" ").decode(errors="replace") if blobs else "?"
            found.append(f"{entry.name}: {cmdline.strip()[:200]}")
    return found


def runner_descendants() -> list[str]:
    """`pid: cmdline` of every `kernelarc.runner` process descended from this one."""
    parents: dict[int, int] = {}
    cmdlines: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
        cmdlines[int(entry.name)] = cmdline
    me, found = os.getpid(), []
    for pid, cmdline in cmdlines.items():
        if "kernelarc.runner" not in cmdline:
            continue
        ancestor = parents.get(pid, 0)
        while ancestor > 1 and ancestor != me:
            ancestor = parents.get(ancestor, 0)
        if ancestor == me:
            found.append(f"{pid}: {cmdline.strip()[:200]}")
    return found


def wait_until_gone(needle: str, grace_s: float = 5.0) -> list[str]:
    """Processes still carrying `needle` after up to `grace_s` (exit teardown is asynchronous)."""
    deadline = time.monotonic() + grace_s
    while True:
        left = processes_with(needle)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


class CountingListener:
    """A TCP server on every host address that counts the connections it accepts."""

    def __init__(self) -> None:
        """Bind and start accepting on a daemon thread."""
        self.sock = socket.create_server(("0.0.0.0", 0))
        self.sock.settimeout(0.2)
        self.port: int = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        """Stop accepting and close the socket."""
        self._stop.set()
        self._thread.join()
        self.sock.close()


CANARY_DIRS = ("/tmp", "/var/tmp", "/dev/shm", str(Path.home()))


@dataclass
class HostWatch:
    """What a suite run must leave untouched, set up on entry and compared by `violations()`."""

    token: str = field(default_factory=lambda: secrets.token_hex(6))
    secret: str = field(default_factory=lambda: "sk-kernelarc-" + secrets.token_hex(12))
    canaries: dict[Path, str] = field(default_factory=dict)
    listener: CountingListener | None = None
    env_before: dict[str, str] = field(default_factory=dict)
    _saved: dict[str, str | None] = field(default_factory=dict)

    def marker(self, name: str) -> str:
        """The `__MARKER__` of one sample in this run (contains the token)."""
        return f"kernelarc-hostile-{self.token}-{name}"

    def __enter__(self) -> "HostWatch":
        for var in (SECRET_VAR, PLAIN_VAR):
            self._saved[var] = os.environ.get(var)
            os.environ[var] = self.secret
        for folder in CANARY_DIRS:
            if Path(folder).is_dir() and os.access(folder, os.W_OK):
                path = Path(folder) / f"kernelarc_canary_{self.token}"
                content = f"canary {self.token} {secrets.token_hex(8)}\n"
                path.write_text(content)
                self.canaries[path] = content
        self.listener = CountingListener()
        self.env_before = dict(os.environ)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.listener is not None:
            self.listener.close()
        for path in self.canaries:
            path.unlink(missing_ok=True)
        for folder in (*CANARY_DIRS, "/"):
            for stray in Path(folder).glob(f"kernelarc-hostile-{self.token}-*"):
                stray.unlink(missing_ok=True)
        for var, value in self._saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value

    @property
    def port(self) -> int:
        """The listener's port (`__PORT__`)."""
        assert self.listener is not None
        return self.listener.port

    def violations(self, results: Iterable[EvalResult]) -> list[str]:
        """Everything about the host that differs from what the suite must leave."""
        found = []
        for path, content in self.canaries.items():
            now = path.read_text() if path.exists() else None
            if now != content:
                found.append(f"canary {path} changed: {now!r}")
        for folder in (*CANARY_DIRS, "/"):
            strays = Path(folder).glob(f"kernelarc-hostile-{self.token}-*")
            found += [f"stray file {p}" for p in strays]
        if self.listener is not None and self.listener.accepted:
            found.append(f"the host listener accepted {self.listener.accepted} connection(s)")
        if dict(os.environ) != self.env_before:
            changed = set(os.environ.items()) ^ set(self.env_before.items())
            found.append(f"host environment changed: {sorted(k for k, _ in changed)}")
        found += [f"leftover process {p}" for p in wait_until_gone(self.token)]
        for result in results:
            if self.secret in log_text(result):
                found.append("the secret reached a sandbox log")
        return found


# --- running ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """A sample's result, the control candidate's after it (if run), and what it left behind."""

    result: EvalResult
    control: EvalResult | None
    leftovers: list[str]


def log_text(result: EvalResult) -> str:
    """Every log of a result in one text: the sandbox tail and each trace's log."""
    logs = [t.evaluation.log for t in result.traces if t.evaluation is not None]
    return "\n".join([result.stderr_tail, *logs])


def statuses(result: EvalResult) -> tuple[EvalStatus, ...]:
    """The status of every trace, in order."""
    return tuple(t.evaluation.status for t in result.traces if t.evaluation is not None)


def run_suite(
    sandboxes: Sequence[Sandbox],
    samples: Sequence[Sample],
    watch: HostWatch,
    *,
    timeout_s: float = SANDBOX_TIMEOUT_S,
    device: str | None = None,
    always_control: bool = False,
) -> dict[str, Outcome]:
    """Evaluate every sample through a pool of sandboxes (one evaluation per sandbox at a time).

    `device` overrides the samples' own; `always_control` runs the control after every sample.
    """
    free: queue.Queue[Sandbox] = queue.Queue()
    for sandbox in sandboxes:
        free.put(sandbox)

    def one(sample: Sample) -> Outcome:
        sandbox = free.get()
        try:
            marker = watch.marker(sample.name)
            request = sample_request(sample, marker=marker, port=watch.port, device=device)
            result = sandbox.evaluate(request, timeout_s=timeout_s)
            leftovers = wait_until_gone(marker)
            control = None
            if always_control or sample.expect.property == "next_candidate_unaffected":
                follow = control_request(device or sample.expect.device)
                control = sandbox.evaluate(follow, timeout_s=timeout_s)
            return Outcome(result, control, leftovers)
        finally:
            free.put(sandbox)

    # Samples that mostly wait (timeouts) first, so their waiting overlaps the rest.
    order = sorted(samples, key=lambda s: EvalStatus.TIMEOUT not in s.expect.statuses)
    with ThreadPoolExecutor(max_workers=len(sandboxes)) as pool:
        futures = {s.name: pool.submit(one, s) for s in order}
        return {name: future.result() for name, future in futures.items()}


# --- properties ------------------------------------------------------------------------------

Check = Callable[[Sample, Outcome, HostWatch], str | None]


def _no_leftover_process(sample: Sample, outcome: Outcome, watch: HostWatch) -> str | None:
    return f"processes left behind: {outcome.leftovers}" if outcome.leftovers else None


def _next_candidate_unaffected(sample: Sample, outcome: Outcome, watch: HostWatch) -> str | None:
    if outcome.control is None:
        return "no control candidate ran"
    got = statuses(outcome.control)
    if set(got) != {EvalStatus.PASSED}:
        return f"the next candidate got {got}: {log_text(outcome.control)[-2000:]}"
    return None


def _host_files_untouched(sample: Sample, outcome: Outcome, watch: HostWatch) -> str | None:
    changed = [str(p) for p, c in watch.canaries.items() if not p.exists() or p.read_text() != c]
    strays = [
        str(p)
        for folder in (*CANARY_DIRS, "/")
        for p in Path(folder).glob(f"{watch.marker(sample.name)}*")
    ]
    return f"host files touched: {changed + strays}" if changed or strays else None


def _no_host_connection(sample: Sample, outcome: Outcome, watch: HostWatch) -> str | None:
    accepted = watch.listener.accepted if watch.listener is not None else 0
    return f"the host listener accepted {accepted} connection(s)" if accepted else None


def _secret_not_leaked(sample: Sample, outcome: Outcome, watch: HostWatch) -> str | None:
    text = log_text(outcome.result)
    return "the secret is in the sandbox log" if watch.secret in text else None


def _log_capped(sample: Sample, outcome: Outcome, watch: HostWatch) -> str | None:
    limit = 2 * LOG_CAP_BYTES
    sizes = [len(outcome.result.stderr_tail.encode())]
    sizes += [len(t.evaluation.log.encode()) for t in outcome.result.traces if t.evaluation]
    return f"a log is over {limit} bytes: {sizes}" if max(sizes) > limit else None


def _verdict_not_forged(sample: Sample, outcome: Outcome, watch: HostWatch) -> str | None:
    for trace in outcome.result.traces:
        evaluation = trace.evaluation
        assert evaluation is not None
        if "forged" in evaluation.log.splitlines()[:1] or evaluation.environment.hardware == (
            "NVIDIA B200"
        ):
            return f"a forged trace survived: {evaluation.log[:200]}"
    return None


def _judge_not_fooled(sample: Sample, outcome: Outcome, watch: HostWatch) -> str | None:
    for trace in outcome.result.traces:
        evaluation = trace.evaluation
        assert evaluation is not None
        if evaluation.status == EvalStatus.INCORRECT_NUMERICAL and (
            evaluation.correctness is None or evaluation.correctness.max_absolute_error <= 0.0
        ):
            return "INCORRECT_NUMERICAL without the judge's own error measurement"
    return None


def _nothing_unpickled(sample: Sample, outcome: Outcome, watch: HostWatch) -> str | None:
    if "unpickled-by-the-judge" in log_text(outcome.result):
        return "the judge unpickled a candidate object"
    return None


def _real_latency(sample: Sample, outcome: Outcome, watch: HostWatch) -> str | None:
    for trace in outcome.result.traces:
        performance = trace.evaluation.performance if trace.evaluation else None
        if performance is None or performance.latency_ms < 50.0:
            return f"latency not reported as measured: {performance}"
    return None


def _no_performance_claimed(sample: Sample, outcome: Outcome, watch: HostWatch) -> str | None:
    for trace in outcome.result.traces:
        evaluation = trace.evaluation
        assert evaluation is not None
        if evaluation.status != EvalStatus.PASSED and evaluation.performance is not None:
            return f"a failed workload still carries a latency: {evaluation.performance}"
    return None


def _next_workload_unaffected(sample: Sample, outcome: Outcome, watch: HostWatch) -> str | None:
    """A worker that crashed fails its workload only: the next gets a fresh worker and passes."""
    last = statuses(outcome.result)[-1]
    return None if last == EvalStatus.PASSED else f"the last workload got {last}"


def _later_workloads_not_run(sample: Sample, outcome: Outcome, watch: HostWatch) -> str | None:
    """After a hang the judge starts the candidate no more (issue 17): one worker start in the
    runner's log, and every later workload's trace says it was not run."""
    starts = outcome.result.stderr_tail.count("starting a solution worker")
    if starts != 1:
        return f"{starts} worker starts in the runner log (expected 1)"
    for trace in outcome.result.traces[1:]:
        evaluation = trace.evaluation
        if evaluation is None or not evaluation.log.startswith("not run:"):
            return f"workload {trace.workload.uuid} was not marked as not run"
    return None


PROPERTIES: dict[str, Check] = {
    "no_leftover_process": _no_leftover_process,
    "next_candidate_unaffected": _next_candidate_unaffected,
    "next_workload_unaffected": _next_workload_unaffected,
    "later_workloads_not_run": _later_workloads_not_run,
    "host_files_untouched": _host_files_untouched,
    "no_host_connection": _no_host_connection,
    "secret_not_leaked": _secret_not_leaked,
    "log_capped": _log_capped,
    "verdict_not_forged": _verdict_not_forged,
    "judge_not_fooled": _judge_not_fooled,
    "nothing_unpickled": _nothing_unpickled,
    "real_latency": _real_latency,
    "no_performance_claimed": _no_performance_claimed,
}


def check_sample(sample: Sample, outcome: Outcome, watch: HostWatch) -> list[str]:
    """What is wrong with one sample's outcome: status, log phrase, its property, leftovers."""
    problems = []
    got = statuses(outcome.result)
    if got != sample.expect.statuses:
        problems.append(f"statuses {got} != expected {sample.expect.statuses}")
    first = outcome.result.traces[0].evaluation
    if sample.expect.log and (first is None or sample.expect.log not in first.log):
        problems.append(f"first log lacks {sample.expect.log!r}")
    failed = PROPERTIES[sample.expect.property](sample, outcome, watch)
    if failed:
        problems.append(f"property {sample.expect.property}: {failed}")
    if outcome.leftovers and sample.expect.property != "no_leftover_process":
        problems.append(f"processes left behind: {outcome.leftovers}")
    if problems:
        problems.append("logs:\n" + log_text(outcome.result)[-3000:])
    return problems


def describe(outcomes: dict[str, Outcome]) -> str:
    """One line per sample: name and statuses (for a failing test's message)."""
    return "\n".join(f"{n}: {[s.value for s in statuses(o.result)]}" for n, o in outcomes.items())
