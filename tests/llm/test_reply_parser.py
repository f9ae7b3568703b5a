"""parse_reply: the reply layout, the precise errors a re-ask quotes, and attached conclusions."""

import json

import pytest
from llm_records import failed, passed, proposal
from openai_server import add_kernel, kernel_reply

from kernelarc.agents.llm.reply_parser import ReplyFormatError, parse_reply
from kernelarc.problems.files import Problem
from kernelarc.schema import Language

SOURCE = add_kernel(1)


def _parse(text: str, **kwargs: object):
    return parse_reply(text, problem="vector_add_f32", author="llm-fusion", **kwargs)  # type: ignore[arg-type]


def test_a_well_formed_reply_gives_the_solution() -> None:
    parsed = _parse(kernel_reply(SOURCE, language="Triton", rationale="fuse  the\nadd"))
    solution = parsed.solution
    assert solution.definition == "vector_add_f32" and solution.author == "llm-fusion"
    assert solution.spec.languages == [Language.TRITON]  # case fixed
    assert solution.spec.entry_point == "kernel.py::run"
    assert [(s.path, s.content) for s in solution.sources] == [("kernel.py", SOURCE)]
    assert parsed.rationale == "fuse the add" and solution.description == "fuse the add"


def test_definition_and_author_are_never_the_models() -> None:
    text = kernel_reply(SOURCE).replace('"name": "test-kernel"', '"definition": "x", "author": "y"')
    parsed = _parse(text)
    assert (parsed.solution.definition, parsed.solution.author) == ("vector_add_f32", "llm-fusion")
    assert parsed.solution.name == "vector_add_f32-llm-fusion"


def test_inline_content_and_extra_file_blocks_become_sources() -> None:
    payload = {
        "rationale": "r",
        "solution": {
            "name": "n",
            "spec": {"languages": ["pytorch"], "entry_point": "kernel.py::run"},
            "sources": [{"path": "kernel.py", "content": "from helper import f\nrun = f\n"}],
        },
    }
    text = (
        f"```json\n{json.dumps(payload)}\n```\n~~~python path=helper.py\ndef f(x, y):\n"
        "    return x + y\n~~~\n"
    )
    solution = _parse(text).solution
    assert [s.path for s in solution.sources] == ["kernel.py", "helper.py"]
    assert solution.spec.target_hardware == ["LOCAL"]  # defaulted


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", "the reply was empty", id="empty"),
        pytest.param("I would use a Triton kernel.", "found no ```json block", id="prose"),
        pytest.param(
            kernel_reply(SOURCE) + "\n```json\n{}\n```\n", "found 2 ```json blocks", id="two-json"
        ),
        pytest.param(
            '```json\n{"solution": {"spec": }\n```\n',
            "not valid JSON: Expecting value at line 1 column 23",
            id="bad-json",
        ),
        pytest.param('```json\n["a"]\n```\n', "holds a list, not an object", id="json-list"),
        pytest.param('```json\n{"rationale": "r"}\n```\n', 'no "solution" object', id="no-sol"),
        pytest.param(
            kernel_reply(SOURCE).replace("path=kernel.py", "path=other.py"),
            "source 'kernel.py' has no content: add a fenced block tagged path=kernel.py",
            id="missing-content",
        ),
        pytest.param(
            kernel_reply(SOURCE).replace('"pytorch"', '"python"'),
            "spec.languages.0: Input should be 'pytorch'",
            id="bad-language",
        ),
        pytest.param(
            kernel_reply(SOURCE).replace("kernel.py::run", "kernel.cu::run"),
            "must be a .py file for Python languages",
            id="bad-entry",
        ),
        pytest.param(
            kernel_reply(SOURCE).rstrip().removesuffix("```"),
            "opened but never closed",
            id="cut-off",
        ),
        pytest.param(
            kernel_reply(SOURCE) + "```python path=kernel.py\nx = 1\n```\n",
            "two fenced blocks carry path=kernel.py",
            id="duplicate-path",
        ),
    ],
)
def test_unusable_replies_say_precisely_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ReplyFormatError) as info:
        _parse(text)
    assert message in str(info.value)


def test_conclusions_resolve_evidence_against_the_shown_attempts(vector_add: Problem) -> None:
    good = passed(vector_add, 3, proposal(vector_add, "llm-fusion", add_kernel(3)), 1.5)
    bad = failed(vector_add, 5, proposal(vector_add, "llm-fusion", add_kernel(5)), "boom")
    conclusions = [
        {"claim": "Fusing the add  into one pass helps.", "evidence": [3, "5"], "confidence": 2},
        {"claim": "Unsupported", "evidence": [99]},
        {"claim": "Family-wide", "evidence": 3, "applies_to_op_family": True},
        {"claim": "One too many", "evidence": [3]},
    ]
    parsed = _parse(
        kernel_reply(SOURCE, conclusions=conclusions),
        op_family="elementwise",
        evidence_pool={3: good, 5: bad},
    )
    first, family = parsed.conclusions
    assert first.claim == "Fusing the add into one pass helps." and first.confidence == 1.0
    assert [(e.attempt_index, e.metric, e.value) for e in first.evidence] == [
        (3, "speedup", 1.5),
        (5, "status", None),
    ]
    assert first.evidence[0].proposal_id == good.proposal.id and first.op_family == ""
    assert family.op_family == "elementwise"
    assert len(parsed.notes) == 2 and "cites no attempt shown" in parsed.notes[0]
    assert "beyond 3 ignored" in parsed.notes[1]
