"""A candidate waits for earlier agents' proposals of its round (kernelarc/campaign/
proposal_order.py), with real threads; the waits are observed through what the class reports,
never by how long they took."""

import json
import shutil
import threading
from pathlib import Path

from kernelarc.agents import make_team
from kernelarc.campaign.proposal_order import ProposalOrder, lead_first, slot_priority
from kernelarc.problems.builtin_set import builtin_dir, resolve_problem
from kernelarc.problems.files import Problem, load_problem

TEAM = {"tiling": 0, "fusion": 1, "compiler": 2}


def test_a_later_agent_waits_for_an_earlier_agent_still_proposing_its_round() -> None:
    order = ProposalOrder(TEAM)
    order.started("tiling", 0)
    assert order.earlier_proposing("compiler", 0) == ["tiling"]
    assert order.earlier_proposing("tiling", 0) == []  # nobody comes before the first
    passed = threading.Event()

    def compiler() -> None:
        order.wait_for_earlier("compiler", 0, limit_s=600)
        passed.set()

    thread = threading.Thread(target=compiler, daemon=True)
    thread.start()
    assert not passed.wait(0.2)  # still waiting: tiling has not proposed yet
    order.finished("tiling")
    thread.join(600)
    assert passed.is_set()


def test_only_earlier_agents_and_earlier_rounds_hold_a_candidate() -> None:
    order = ProposalOrder(TEAM)
    order.started("compiler", 0)  # later in the team: never holds tiling or fusion
    order.started("tiling", 1)  # its second candidate: does not hold anyone's first
    assert order.earlier_proposing("fusion", 0) == []
    assert order.earlier_proposing("fusion", 1) == ["tiling"]
    assert order.wait_for_earlier("fusion", 0, limit_s=600) < 600


def test_a_stuck_agent_delays_the_others_by_a_bounded_time() -> None:
    order = ProposalOrder(TEAM)
    order.started("tiling", 0)  # and never finishes
    order.wait_for_earlier("compiler", 0, limit_s=0.05)  # returns although tiling still proposes
    assert order.earlier_proposing("compiler", 0) == ["tiling"]


def test_an_anchor_queues_before_every_candidate_of_its_round_and_after_earlier_rounds() -> None:
    tiling_first = slot_priority(TEAM, "tiling", 0, anchor=False)
    compile_default = slot_priority(TEAM, "compiler", 0, anchor=True)
    eager = slot_priority(TEAM, "compiler", 1, anchor=True)
    tiling_second = slot_priority(TEAM, "tiling", 1, anchor=False)
    later_variant = slot_priority(TEAM, "compiler", 2, anchor=False)
    assert sorted([later_variant, tiling_second, eager, tiling_first, compile_default]) == [
        compile_default,
        tiling_first,
        eager,
        tiling_second,
        later_variant,
    ]
    # An agent the team does not list queues after every listed one of its round.
    assert slot_priority(TEAM, "stranger", 0, anchor=False) > slot_priority(
        TEAM, "compiler", 0, anchor=False
    )


def _float32_gemm(tmp_path: Path) -> Problem:
    target = tmp_path / "gemm_fp32"
    shutil.copytree(builtin_dir() / "gemm_bias_gelu", target)
    data = json.loads((target / "definition.json").read_text())
    for spec in data["inputs"].values():
        spec["dtype"] = "float32"
    (target / "definition.json").write_text(json.dumps(data))
    return load_problem(target)


def test_the_precision_agent_leads_on_float32_matrix_products_on_cuda(tmp_path: Path) -> None:
    team = make_team(["tiling", "memory", "fusion", "pipelining", "precision", "compiler"], seed=0)
    fp32 = _float32_gemm(tmp_path)
    names = [a.name for a in lead_first(team, fp32, "cuda")]
    assert names == ["precision", "tiling", "memory", "fusion", "pipelining", "compiler"]
    # bf16 operands (the built-in), the CPU, and a problem without a matrix product: team order.
    for problem, device in [
        (resolve_problem("gemm_bias_gelu"), "cuda"),
        (fp32, "cpu"),
        (resolve_problem("rmsnorm"), "cuda"),
    ]:
        assert lead_first(team, problem, device) == team, (problem.name, device)
