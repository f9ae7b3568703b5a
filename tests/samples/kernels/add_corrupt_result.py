import os
from pathlib import Path


def run(x, y):
    # Overwrites the runner's result file with garbage and exits "successfully".
    Path("result.json").write_text("{not json")
    os._exit(0)
