"""`kernelarc campaign` as a new user meets it, run piped as from a script or CI: config and
problem errors before anything is created, the help, shell completion, a piped campaign's
progress and closing lines, Ctrl-C, and a sweep with a failing job."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kernelarc.problems.builtin_set import builtin_names
from kernelarc.tracking import keys
from tests.kernelarc_command import (
    KERNELARC,
    copy_vector_add,
    kernelarc_env,
    leftovers,
    run_kernelarc,
)

# --- errors before anything is created ------------------------------------------------------


def test_a_misspelt_key_gets_did_you_mean_and_exit_status_2(tmp_path: Path) -> None:
    proc = run_kernelarc(["campaign", "budget.candidate=3"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "unknown config key 'budget.candidate': did you mean budget.candidates?" in proc.stderr
    assert "+budget.candidate" not in proc.stderr, "Hydra's hint would fail as well"
    assert not (tmp_path / "outputs").exists()


def test_cfg_with_multirun_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    proc = run_kernelarc(["campaign", "--cfg", "job", "-m", "seed=0,1"], tmp_path)
    assert proc.returncode == 2
    assert "--cfg and --multirun cannot be combined" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_bad_problem_creates_no_run_dir_and_no_mlflow_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = run_kernelarc(
        ["campaign", "problem=no_such_problem", f"hydra.run.dir={run_dir}", "llm=openai"],
        tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert any(line.startswith("error: unknown problem 'no_such_problem'") for line in lines)
    assert not run_dir.exists(), "a campaign that never started leaves no run dir"
    assert not (tmp_path / "mlflow.db").exists(), "nor an MLflow run"
    # An endpoint no member of the (offline) team uses: said, with the teams that would.
    warning = " ".join(proc.stderr.split())
    assert "llm=openai is set but no member of agents.team uses an LLM" in warning
    assert "pick agents=llm (LLM agents only) or agents=mixed" in warning


def test_help_lists_every_group_launcher_and_builtin_problem(tmp_path: Path) -> None:
    proc = run_kernelarc(["campaign", "--help"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert (
        "hydra/launcher (with -m): basic (default: one job after another), local_joblib, slurm"
        in text
    )
    for group in (
        "agents:",
        "coordination:",
        "executor:",
        "guard:",
        "llm:",
        "sandbox:",
        "tracking:",
    ):
        assert f"\n{group}" in text
    for name in builtin_names():
        assert name in text.split("Built-in problems (problem=):", 1)[1].split(".\n", 1)[0]
    assert "hydra/launcher=joblib" not in text, "one launcher name everywhere: local_joblib"


def test_shell_completion_completes_commands_and_overrides(tmp_path: Path) -> None:
    def complete(line: str) -> list[str]:
        env = {"COMP_LINE": line, "COMP_POINT": str(len(line))}
        proc = run_kernelarc(["-sc", "query=bash"], tmp_path, extra_env=env)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()

    assert complete("kernelarc ev") == ["eval"]
    assert complete("kernelarc campaign agents=") == [
        "agents=llm",
        "agents=mixed",
        "agents=offline",
    ]
    assert "problem=" in complete("kernelarc campaign prob")
    install = run_kernelarc(["-sc", "install=bash"], tmp_path)
    assert install.returncode == 0 and "complete -o nospace" in install.stdout


# --- campaigns (each runs real sandboxed evaluations) -----------------------------------------


@pytest.mark.slow
def test_a_piped_campaign_prints_progress_and_one_correct_next_steps_block(
    tmp_path: Path, tmpdir_: Path
) -> None:
    """The compiler's first candidate is the reference as-is: it passes, and it must not be
    presented as a kernel the campaign found."""
    problem = copy_vector_add(tmp_path)
    args = ["campaign", f"problem={problem}", "agents.team=[compiler]", "budget.candidates=1"]
    args += ["hydra.run.dir=run"]
    proc = run_kernelarc(args, tmp_path, tmpdir_, {"KERNELARC_PROGRESS_INTERVAL_S": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    err = proc.stderr
    lines = err.splitlines()
    progress = [line for line in lines if line.startswith("[")]
    assert any("budget 0/1: evaluating the first candidates" in line for line in progress)
    assert "CPU timings (cpu_monotonic): a pipeline check, not kernel performance" in progress[1]
    assert any("attempt 1/1 by compiler: PASSED" in line for line in progress)
    assert not any(ch in err for ch in "…│┃━"), "piped output is plain and complete"
    assert (
        "No generated kernel beat the reference: the best correct candidate is the "
        "reference itself, unchanged" in err
    )
    assert "Best:" not in err
    assert "a pipeline check, not kernel performance" in err
    assert err.count("Next steps:") == 1
    steps = err.split("Next steps:", 1)[1]
    assert "nothing to export" in steps
    mlflow = str(KERNELARC.parent / "mlflow")
    assert (
        f"{mlflow} ui --backend-store-uri sqlite:///{tmp_path / 'mlflow.db'} --port 5000" in steps
    )
    assert f"{KERNELARC} resume run budget.candidates=2" in steps
    assert "Export:" not in err and "MLflow UI: MLflow experiment" not in err
    # MLflow: one child run (the only agent), grouped by the definition's name.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("kernelarc")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    kinds = sorted(r.data.tags[keys.KIND] for r in runs)
    assert kinds == ["agent", "campaign"]
    for run in runs:
        assert run.data.tags[keys.PROBLEM] == "vector_add_f32"
        assert run.data.tags[keys.PROBLEM_SOURCE] == str(problem)
        assert run.data.tags[keys.TIMING] == "cpu: pipeline check, not performance"
    assert leftovers(tmpdir_) == [], "lock files or sandbox dirs left in the temp dir"


def _default_sigint() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_marks_the_run_and_says_how_to_resume(tmp_path: Path) -> None:
    problem = copy_vector_add(tmp_path)
    run_dir = tmp_path / "run"
    args = ["campaign", f"problem={problem}", "agents.team=[compiler]", "budget.candidates=4"]
    args += [f"hydra.run.dir={run_dir}"]
    proc = subprocess.Popen(
        [str(KERNELARC), *args],
        cwd=tmp_path,
        env=kernelarc_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # As from an interactive shell: Ctrl-C neither ignored nor blocked, whatever this
        # pytest worker inherited (a fresh-clone CI run once saw the campaign finish with rc 0,
        # as if the SIGINT never arrived).
        preexec_fn=_default_sigint,
    )
    try:
        # The eager reference is recorded first; the torch.compile candidates take long.
        deadline = time.monotonic() + 420
        log = run_dir / "attempts.jsonl"
        while not (log.is_file() and log.read_text().count("\n") >= 1):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no attempt was recorded"
            time.sleep(0.5)
        os.kill(proc.pid, signal.SIGINT)  # what Ctrl-C sends the foreground process
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    record = json.loads((run_dir / "campaign.json").read_text())
    assert record["status"] == "INTERRUPTED"
    assert record["finished_at"]
    assert f"Continue with: {KERNELARC} resume run\n" in err  # relative to the cwd
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("kernelarc")
    assert experiment is not None
    statuses = {r.info.status for r in client.search_runs([experiment.experiment_id])}
    assert statuses == {"KILLED"}, "the runs are marked, not left RUNNING"
    attempts = log.read_text().splitlines()
    assert all(json.loads(a)["status"] != "INFRA_ERROR" for a in attempts), (
        "the stopped evaluation was recorded as an attempt"
    )


@pytest.mark.slow
def test_a_sweep_runs_every_job_and_lists_the_failures(tmp_path: Path) -> None:
    """Job 0's problem does not exist; job 1 runs, though none of its agents applies to the
    problem (a vector add has no matmul to rewrite; the Triton strategies would apply, through
    generated kernels): each says why once, and the campaign says why the budget was not
    spent."""
    problem = copy_vector_add(tmp_path)
    args = ["campaign", "-m", f"problem=no_such_problem,{problem}", "tracking=none"]
    args += ["agents.team=[library,precision]", "budget.candidates=3", "hydra.sweep.dir=sweep"]
    proc = run_kernelarc(args, tmp_path)
    assert proc.returncode == 1, proc.stderr[-4000:]
    err = proc.stderr
    assert (tmp_path / "sweep" / "1" / "campaign.json").is_file(), "job 1 ran"
    assert not (tmp_path / "sweep" / "0").exists(), "job 0 never started: nothing left"
    assert "sweep sweep: 2 jobs, 1 finished, 1 failed:" in err
    assert "  failed job 0 (problem=no_such_problem " in err
    assert err.count("library does not apply: the problem has no matmul") == 1
    assert err.count("precision does not apply: the problem has no matmul") == 1
    assert (
        "Stopped with budget 0/3 used: no agent has anything new to propose; library, "
        "precision do not apply to this problem" in err
    )
