"""Child process of `kernelarc.runner.cpp_build`: one `torch.utils.cpp_extension.load` call.

Run as a script by path (`python -P _cpp_build_child.py request.json`), so it imports nothing
of kernelarc, and no candidate file can shadow a module it needs. The request JSON holds the
keyword arguments of `load`. `load` compiles and links with ninja, then imports the result, so
an undefined symbol also fails here, as a build error. Exit 0: `<build_directory>/<name>.so`
exists and imports. Exit 1: the reason is on stderr (the parent keeps its head and tail).
"""

import json
import sys
import traceback
from pathlib import Path


def main(argv: list[str]) -> int:
    """Build the extension described by the JSON file `argv[1]`."""
    request = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    try:
        from torch.utils.cpp_extension import load

        load(
            name=request["name"],
            sources=request["sources"],
            extra_cflags=request["extra_cflags"],
            extra_cuda_cflags=request["extra_cuda_cflags"],
            extra_ldflags=request["extra_ldflags"],
            extra_include_paths=request["extra_include_paths"],
            build_directory=request["build_directory"],
            verbose=False,
        )
    except RuntimeError as exc:
        # torch's "Error building extension 'name': <ninja output>" already says it all.
        sys.stderr.write(f"{exc}\n")
        return 1
    except Exception:
        sys.stderr.write(traceback.format_exc())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
