"""`python -m kernelarc.cli ARGS`: the `kernelarc` command without its console script (the
tests and scripts/device_run.sh run it so, with this interpreter)."""

from kernelarc.cli import main

raise SystemExit(main())
