"""Every `kernelarc` example in the README's code blocks and in the commands' --help is checked:
campaign examples compose (Hydra `--cfg job`, one job of a sweep), the other commands' examples
parse, and the cheap ones run (`eval ... --reference` on a problem dir)."""

import re
import shlex
import shutil
from pathlib import Path

import pytest

from kernelarc.cli import build_parser
from tests.kernelarc_command import SAMPLES, run_kernelarc

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ("campaign", "resume", "eval", "export", "replay", "sync", "report", "problems")


def _readme_examples() -> list[str]:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL)
    return [line for block in blocks for line in _commands(block)]


def _help_examples(tmp_path: Path) -> list[str]:
    found: list[str] = []
    for args in (["--help"], *([c, "--help"] for c in COMMANDS)):
        proc = run_kernelarc(list(args), tmp_path)
        assert proc.returncode == 0, proc.stderr
        found += _commands(proc.stdout)
    return found


def _commands(text: str) -> list[str]:
    """The `kernelarc ...` command lines of a text (comments cut, continuations joined)."""
    text = text.replace("\\\n", " ")
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(".venv/bin/kernelarc "):
            line = line.removeprefix(".venv/bin/")
        if line.startswith("kernelarc ") and "#" in line:
            line = line.split("  #", 1)[0].strip()
        if not line.startswith("kernelarc ") or "<" in line or "..." in line:
            continue
        if shlex.split(line)[1] in COMMANDS:  # not prose such as `kernelarc campaign: ...`
            out.append(line)
    return out


def _one_job(args: list[str]) -> list[str]:
    """A sweep's command line as its first job: no -m, the first value of every sweep."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    out = []
    for arg in args:
        if arg in ("-m", "--multirun"):
            continue
        override = parser.parse_override(arg)
        if override.is_sweep_override():
            first = next(iter(override.sweep_string_iterator()))
            arg = f"{override.get_key_element()}={first}"
        out.append(arg)
    return out


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    found = _readme_examples() + _help_examples(tmp_path_factory.mktemp("help"))
    assert len(found) > 20, found
    return sorted(set(found))


def test_campaign_examples_compose(examples: list[str], tmp_path: Path) -> None:
    campaigns = [shlex.split(e)[2:] for e in examples if e.startswith("kernelarc campaign")]
    assert len(campaigns) >= 10
    for args in campaigns:
        proc = run_kernelarc(["campaign", "--cfg", "job", *_one_job(args)], tmp_path)
        assert proc.returncode == 0, f"{shlex.join(args)}:\n{proc.stderr[-2000:]}"
        assert "problem:" in proc.stdout


def test_other_examples_parse(examples: list[str]) -> None:
    others = [e for e in examples if not e.startswith("kernelarc campaign")]
    assert {shlex.split(e)[1] for e in others} >= {"eval", "export", "sync", "report", "resume"}
    parser = build_parser()
    for example in others:
        args = shlex.split(example)[1:]
        if args[0] == "resume":
            args = args[:2]  # the rest are campaign overrides (checked by Hydra)
        parser.parse_args(args)  # argparse exits (a failure here) on a bad example


def test_the_new_problem_check_runs_as_documented(examples: list[str], tmp_path: Path) -> None:
    example = next(e for e in examples if "--reference" in e)
    args = shlex.split(example)[1:]
    shutil.copytree(SAMPLES / "problems" / "vector_add", tmp_path / args[1])
    proc = run_kernelarc(args, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASSED") == 2
