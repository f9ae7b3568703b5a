"""No module over 400 lines without saying why (issue #19): a long module is usually two concerns
that were never split; the few that are one cohesive table or schema say so in a docstring line
starting `Over 400 lines:`."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The source trees held to the limit (tests are not: a test file follows its subject).
TREES = ("kernelarc", "leaderboard", "sandbox", "scripts")
MAX_LINES = 400
REASON = "Over 400 lines:"


def _states_a_reason(text: str, path: Path) -> bool:
    """Whether the module docstring has a line starting `Over 400 lines:`."""
    docstring = ast.get_docstring(ast.parse(text, filename=str(path))) or ""
    return any(line.strip().startswith(REASON) for line in docstring.splitlines())


def _oversized() -> dict[str, int]:
    """Relative path -> line count of every module over the limit without a reason line."""
    found: dict[str, int] = {}
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            lines = len(text.splitlines())
            if lines > MAX_LINES and not _states_a_reason(text, path):
                found[str(path.relative_to(ROOT))] = lines
    return found


def test_no_module_over_400_lines_without_a_reason() -> None:
    over = _oversized()
    listing = "\n".join(f"  {path}: {lines} lines" for path, lines in sorted(over.items()))
    assert not over, (
        f"modules over {MAX_LINES} lines: split them by concern, or put a line starting "
        f"{REASON!r} and the reason in the module docstring:\n{listing}"
    )


def test_the_reason_line_is_found_in_the_docstring_only(tmp_path: Path) -> None:
    """The marker counts in the module docstring, not in a comment or a later string."""
    with_reason = '"""Summary.\n\nOver 400 lines: one table.\n"""\n'
    in_comment = '"""Summary."""\n# Over 400 lines: a comment\n'
    later = '"""Summary."""\nX = """\nOver 400 lines: a constant\n"""\n'
    assert _states_a_reason(with_reason, tmp_path / "a.py")
    assert not _states_a_reason(in_comment, tmp_path / "b.py")
    assert not _states_a_reason(later, tmp_path / "c.py")
