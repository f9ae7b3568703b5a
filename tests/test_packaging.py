"""The wheel's package list: every package folder of the checkout is in it (a missing one is
absent from a non-editable install, such as the Docker image's `pip install /src`)."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_for_the_wheel() -> None:
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("kernelarc", "leaderboard")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found - listed == set(), "package folders missing from [tool.setuptools] packages"
    assert listed - found == {"kernelarc.conf"}, "listed packages that do not exist"
