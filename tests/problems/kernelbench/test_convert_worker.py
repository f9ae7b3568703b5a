"""A KernelBench file is code: one that hangs, kills its process or kills the worker is a listed
failure, and the files after it still convert (real worker processes, real signals)."""

import json
from pathlib import Path

from conftest import SAMPLES, run_kernelarc

HOSTILE = SAMPLES.parent / "kernelbench_hostile"


def test_hanging_and_killing_files_are_failures_and_the_import_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_kernelarc(
        [
            "problems",
            "import",
            "kernelbench",
            str(HOSTILE),
            "--out",
            str(out),
            "--jobs",
            "1",
            "--timeout",
            "20",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((out / "import_report.json").read_text())
    by_source = {f["source"]: f for f in report["files"]}
    assert by_source["level1/1_Hangs.py"]["cause"] == "timeout"
    assert "ran past 20 s" in by_source["level1/1_Hangs.py"]["reason"]
    assert by_source["level1/2_Kills_itself.py"]["cause"] == "crashed"
    assert "signal 9" in by_source["level1/2_Kills_itself.py"]["reason"]
    assert by_source["level1/3_Kills_its_parent.py"]["cause"] == "crashed"
    assert "worker died (signal 9)" in by_source["level1/3_Kills_its_parent.py"]["reason"]
    assert by_source["level1/4_Fine.py"]["converted"] is True
    assert (out / "kb_l1_4_fine" / "definition.json").is_file()
    assert sorted(p.name for p in out.iterdir()) == ["import_report.json", "kb_l1_4_fine"]
