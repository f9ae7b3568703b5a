"""scripts/bundle_outputs.sh: a device run's outputs fit the 8 files the device tool brings back,
the summaries kept as they are and the rest packed, nothing lost."""

import subprocess
import tarfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bundle_outputs.sh"


def _run(out: Path) -> None:
    subprocess.run([str(SCRIPT), str(out)], check=True, capture_output=True, timeout=60)


def test_past_eight_files_the_summaries_stay_and_the_rest_is_packed(tmp_path: Path) -> None:
    names = ["suite.json", "suite.md", "kernelgen.json", "kernelgen.md", "machine.txt"]
    names += ["suite.log", "kernelgen.log", "gpu_tests.log", "suite_rundirs.tgz", "cupti.log"]
    for name in names:
        (tmp_path / name).write_text(f"content of {name}\n")
    _run(tmp_path)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["kernelgen.json", "kernelgen.md", "rest.tgz", "suite.json", "suite.md"]
    with tarfile.open(tmp_path / "rest.tgz") as packed:
        members = {Path(m.name).name: m for m in packed.getmembers()}
        assert set(members) == set(names) - set(left)
        extracted = packed.extractfile(members["suite.log"])
        assert extracted is not None and extracted.read() == b"content of suite.log\n"


def test_eight_files_or_fewer_are_left_alone(tmp_path: Path) -> None:
    for i in range(8):
        (tmp_path / f"stage{i}.log").write_text("x")
    _run(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"stage{i}.log" for i in range(8)]
