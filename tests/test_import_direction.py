"""Layering the linter cannot express: `leaderboard` imports `kernelarc`, and of `kernelarc` only
the export command imports `leaderboard` (scoring and the run-dir reader sit below both; issue
#19 found report -> leaderboard -> guard -> leaderboard cycles)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The application on top: the command that writes a leaderboard export.
ALLOWED = {"kernelarc/cli/export.py"}


def _imports_leaderboard(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "leaderboard" for a in node.names
        ):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "leaderboard":
            return True
    return False


def test_only_the_export_command_imports_leaderboard() -> None:
    importing = {
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "kernelarc").rglob("*.py"))
        if _imports_leaderboard(path)
    }
    assert importing <= ALLOWED, f"library modules importing leaderboard: {importing - ALLOWED}"
    assert importing, "the export command no longer imports leaderboard: update ALLOWED"
