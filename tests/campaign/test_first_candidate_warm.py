"""A campaign starts every slot's runner before its first candidate (`Executor.prepare`): a
real CPU campaign with one scripted candidate and real LocalSandbox processes. The agent's
first proposal waits until runners of this process are seen (the attempt record keeps no
sandbox notes, so the runners themselves are looked for)."""

import contextlib
import os
import threading
import time
from pathlib import Path

from scripted import ScriptedAgent, adder, campaign_config

from kernelarc.campaign import run_campaign
from kernelarc.config import CoordinationConfig
from kernelarc.rundir.attempts_log import read_attempts
from kernelarc.schema import EvalStatus
from kernelarc.tracking.null_tracker import NullTracker

APPEAR_S = 120.0


def _descends_from_us(pid: int) -> bool:
    while pid > 1:
        if pid == os.getpid():
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rpartition(")")[2].split()[1])
    return False


def _our_runners() -> list[int]:
    """`python -P -m kernelarc.runner` processes started by this test process."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if argv[1:4] == [b"-P", b"-m", b"kernelarc.runner"] and _descends_from_us(
                int(entry.name)
            ):
                found.append(int(entry.name))
    return found


def test_every_slot_has_a_runner_before_the_first_candidate(tmp_path: Path) -> None:
    coordination = CoordinationConfig(memory=False, guard=False, peer_state=False, drafting=False)
    # A timed and a correctness slot.
    cfg = campaign_config(1, coordination, max_parallel=1, correctness_pool=True)
    gate = threading.Event()
    seen: list[int] = []
    # Runners of an earlier test on this pytest worker may still be winding down (the full
    # suite once saw six at the first look): only runners started from now on are this
    # campaign's.
    before = set(_our_runners())

    def watch() -> None:
        deadline = time.monotonic() + APPEAR_S
        while len(seen) < 2 and time.monotonic() < deadline:
            seen[:] = [pid for pid in _our_runners() if pid not in before]
            time.sleep(0.05)
        gate.set()  # the agent proposes only now

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    agent = ScriptedAgent("a", [adder("1")], gate=gate)
    summary = run_campaign(cfg, tmp_path, NullTracker(), team=[agent])
    watcher.join()

    assert len(seen) == 2, seen  # one prepared spare per slot, before any proposal
    assert summary.attempts == 1
    (attempt,) = read_attempts(tmp_path / "attempts.jsonl")
    assert attempt.status == EvalStatus.PASSED, attempt.stderr_tail[-2000:]
