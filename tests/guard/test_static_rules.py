"""Static rules: one hostile snippet per rule must hit exactly that rule; benign kernels (every
built-in agent's proposals, plain Triton, side streams) must pass with no blocking finding."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelarc.agents import AgentContext, make_team
from kernelarc.guard import RULES, blocking, scan_solution
from kernelarc.problems.builtin_set import builtin_names, resolve_problem
from kernelarc.schema import BuildSpec, Language, Solution, SourceFile, TargetHardware

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "guard"


def _solution(
    source: str, path: str = "kernel.py", extra: dict[str, str] | None = None
) -> Solution:
    sources = [SourceFile(path=path, content=source)]
    sources += [SourceFile(path=p, content=c) for p, c in (extra or {}).items()]
    return Solution(
        name="s",
        definition="rmsnorm",
        author="test",
        spec=BuildSpec(
            languages=[Language.PYTORCH],
            target_hardware=[TargetHardware.LOCAL],
            entry_point=f"{path}::run",
            destination_passing_style=False,
        ),
        sources=sources,
    )


@dataclass(frozen=True)
class Hostile:
    rule: str
    source: str


HOSTILE = [
    Hostile("KA-S001", "import sys\nsys.modules['torch'] = None\ndef run(x):\n    return x\n"),
    Hostile("KA-S001", "import sys\ndef run(x):\n    sys.path.insert(0, '/tmp')\n    return x\n"),
    Hostile("KA-S002", "def run(x):\n    t = __import__('torch')\n    return t.relu(x)\n"),
    Hostile(
        "KA-S002",
        "import importlib\nm = importlib.import_module('os')\ndef run(x):\n    return x\n",
    ),
    Hostile(
        "KA-S002", "import builtins\nbuiltins.print = lambda *a: None\ndef run(x):\n    return x\n"
    ),
    Hostile("KA-S003", "import time\ntime.perf_counter = lambda: 0.0\ndef run(x):\n    return x\n"),
    Hostile(
        "KA-S003",
        "import torch\nsetattr(torch.cuda, 'synchronize', lambda: None)\n"
        "def run(x):\n    return x\n",
    ),
    Hostile("KA-S003", "from torch import cuda\ndel cuda.synchronize\ndef run(x):\n    return x\n"),
    Hostile(
        "KA-S004",
        "import torch\ndef run(x):\n    f = getattr(torch.cuda.Event, 'elapsed_time')\n"
        "    return x\n",
    ),
    Hostile(
        "KA-S005",
        "import torch\ndef run(x):\n    out = x * 2\n    torch.manual_seed(200)\n    return out\n",
    ),
    Hostile("KA-S006", "import gc\ndef run(x):\n    return [o for o in gc.get_objects()][0]\n"),
    Hostile(
        "KA-S007", "import inspect\ndef run(x):\n    f = inspect.currentframe()\n    return x\n"
    ),
    Hostile(
        "KA-S008",
        "import threading\ndef run(x):\n    threading.Thread(target=print).start()\n    return x\n",
    ),
    Hostile(
        "KA-S008",
        "import torch\ndef run(x):\n    fut = torch.jit.fork(torch.relu, x)\n"
        "    return torch.jit.wait(fut)\n",
    ),
    Hostile("KA-S008", "import multiprocessing as mp\ndef run(x):\n    return x\n"),
    Hostile("KA-S009", "import os\ndef run(x):\n    os.system('true')\n    return x\n"),
    Hostile("KA-S009", "from subprocess import run as sh\ndef run(x):\n    return x\n"),
    Hostile("KA-S009", "import os\ndef run(x):\n    os._exit(0)\n"),
    Hostile("KA-S010", "def run(x):\n    open('/tmp/out', 'w').write('1')\n    return x\n"),
    Hostile("KA-S010", "from pathlib import Path\ndef run(x):\n    return Path('a').read_text()\n"),
    Hostile("KA-S010", "import os\ndef run(x):\n    os.write(1, b'{}')\n    return x\n"),
    Hostile(
        "KA-S010",
        "import torch\ncached = torch.load('answers.pt')\ndef run(x):\n    return cached\n",
    ),
    Hostile("KA-S011", "import socket\ndef run(x):\n    return x\n"),
    Hostile("KA-S011", "import urllib.request\ndef run(x):\n    return x\n"),
    Hostile(
        "KA-S012", "import ctypes\nlib = ctypes.CDLL('libc.so.6')\ndef run(x):\n    return x\n"
    ),
    Hostile("KA-S012", "def run(x):\n    spec = __loader__\n    return x\n"),
    Hostile(
        "KA-S013", "from torch.utils.cpp_extension import load_inline\ndef run(x):\n    return x\n"
    ),
    Hostile(
        "KA-S014",
        "import functools\n@functools.lru_cache(maxsize=None)\ndef run(x):\n    return x * 2\n",
    ),
    Hostile(
        "KA-S014",
        "from functools import cache\ndef _impl(x):\n    return x * 2\nrun = cache(_impl)\n",
    ),
    Hostile("KA-S016", "import hashlib\ndef run(x):\n    return x\n"),
    Hostile(
        "KA-S017", "from _kernelarc_reference import run as ref\ndef run(x):\n    return ref(x)\n"
    ),
    Hostile(
        "KA-S017",
        "import json\nd = json.loads(open('definition.json').read())\ndef run(x):\n    return x\n",
    ),
    Hostile("KA-S018", "from kernelarc.runner import timing\ndef run(x):\n    return x\n"),
    Hostile("KA-S019", "def run(x):\n    return eval('x * 2')\n"),
    Hostile("KA-S020", "def run(x):\n    return x\nrun.__code__ = (lambda x: x).__code__\n"),
    Hostile("KA-S021", "def run(x):\n    return x.as_subclass(type(x))\n"),
    Hostile(
        "KA-S022",
        "import os\nos.environ['CUDA_LAUNCH_BLOCKING'] = '0'\ndef run(x):\n    return x\n",
    ),
    Hostile(
        "KA-S030",
        "import functools\n@functools.lru_cache\ndef _cfg(n):\n    return n\n"
        "def run(x):\n    return x\n",
    ),
    Hostile("KA-S031", "def run(x):\n    assert x.data_ptr() % 16 == 0\n    return x\n"),
    Hostile(
        "KA-S032", "_last = None\ndef run(x):\n    global _last\n    _last = x\n    return x\n"
    ),
    Hostile("KA-S033", "import time\ndef run(x):\n    time.sleep(0)\n    return x\n"),
    Hostile(
        "KA-S034",
        "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\ndef run(x):\n    return x\n",
    ),
    Hostile("KA-S035", "def run(x)\n    return x\n"),
]

SAMPLE_FILES = [
    pytest.param(
        "monkeypatch_timer_alias.py", {"KA-S003", "KA-S004"}, id="monkeypatch_timer_alias"
    ),
    pytest.param("data_ptr_cache.py", {"KA-S015", "KA-S031"}, id="data_ptr_cache"),
    pytest.param("forged_result.py", {"KA-S001", "KA-S009", "KA-S010"}, id="forged_result"),
    pytest.param("hidden_thread.py", {"KA-S008"}, id="hidden_thread"),
    pytest.param("frame_walk.py", {"KA-S007"}, id="frame_walk"),
    pytest.param("lazy_output.py", {"KA-S021"}, id="lazy_output"),
]


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=f"{c.rule}-{i}") for i, c in enumerate(HOSTILE)]
)
def test_hostile_snippet_hits_its_rule(case: Hostile) -> None:
    findings = scan_solution(_solution(case.source))
    assert case.rule in {f.rule for f in findings}, findings
    rule = next(r for r in RULES if r.id == case.rule)
    if rule.severity == "block":
        assert blocking(findings)


@pytest.mark.parametrize(("name", "expected"), SAMPLE_FILES)
def test_hostile_sample_files(name: str, expected: set[str]) -> None:
    findings = scan_solution(_solution((SAMPLES / name).read_text()))
    assert expected <= {f.rule for f in findings}, findings
    assert blocking(findings)


def test_every_rule_has_a_hostile_case() -> None:
    covered = {c.rule for c in HOSTILE} | {"KA-S015", "KA-S023"}
    assert covered == {r.id for r in RULES}
    assert len({r.id for r in RULES}) == len(RULES)


@pytest.mark.parametrize(
    "path", ["definition.json", "kernelarc/__init__.py", "torch.py", "sitecustomize.py", "x.pth"]
)
def test_reserved_source_paths_block(path: str) -> None:
    findings = scan_solution(_solution("def run(x):\n    return x\n", extra={path: "x = 1\n"}))
    assert [f.rule for f in blocking(findings)] == ["KA-S023"]
    assert findings[0].path == path


BENIGN = [
    pytest.param(
        "import torch\n\n# runs on a side stream; the word stream is fine\n"
        "def run(x, weight):\n    s = torch.cuda.Stream()\n    with torch.cuda.stream(s):\n"
        "        out = x * weight\n"
        "    torch.cuda.current_stream().wait_stream(s)\n    return out\n",
        id="side-stream",
    ),
    pytest.param(
        "import math\n\nimport torch\nimport triton\nimport triton.language as tl\n\n\n"
        "@triton.jit\ndef _k(x_ptr, o_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)\n\n\n"
        "def run(x, weight):\n    out = torch.empty_like(x)\n"
        "    _k[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)\n"
        "    return out * math.sqrt(1.0)\n",
        id="plain-triton",
    ),
    pytest.param(
        '"""Opens nothing: open(, eval and sys.modules only appear in this docstring."""\n'
        "import torch\n\n# open('x') and os.system in a comment are not code\n"
        "def run(x, weight):\n    return torch.compile(lambda a: a * 2)(x)\n",
        id="words-in-comments",
    ),
    pytest.param(
        "import torch\n_CONFIGS = {}\n\ndef run(x, weight):\n    key = (x.shape, x.dtype)\n"
        "    if key not in _CONFIGS:\n        _CONFIGS[key] = 128\n    return x * weight\n",
        id="per-shape-config-cache",
    ),
]


@pytest.mark.parametrize("source", BENIGN)
def test_benign_sources_have_no_blocking_finding(source: str) -> None:
    findings = scan_solution(_solution(source))
    assert not blocking(findings), findings


def test_strings_are_scanned_but_docstrings_are_not() -> None:
    # getattr(x, "elapsed_time") is a real use; a docstring naming it is prose.
    used = scan_solution(_solution("def run(x):\n    n = 'elapsed_time'\n    return x\n"))
    assert {f.rule for f in used} == {"KA-S004"}
    prose = scan_solution(_solution('def run(x):\n    """uses elapsed_time"""\n    return x\n'))
    assert prose == []


_MAX_PROPOSALS = 24


@pytest.mark.parametrize("problem", builtin_names())
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_builtin_agents_proposals_are_clean(problem: str, device: str) -> None:
    loaded = resolve_problem(problem, "workload.jsonl")
    count = 0
    for agent in make_team(["compiler", "triton_template"], seed=0):
        seen: set[str] = set()
        # The first proposals cover every template and variant (settings differ only in
        # constants after those); walking a whole CUDA grid took minutes per problem in CI.
        while (
            len(seen) < _MAX_PROPOSALS
            and (
                proposal := agent.propose(
                    AgentContext(problem=loaded, device=device, seen_ids=frozenset(seen))
                )
            )
            is not None
        ):
            seen.add(proposal.id)
            count += 1
            findings = scan_solution(proposal.solution)
            assert not findings, (proposal.id, findings)
    assert count > 0


def test_docs_catalogue_lists_every_rule() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "guard.md").read_text()
    for rule in RULES:
        assert f"| `{rule.id}` | {rule.severity} |" in docs, rule.id
