"""Hydra configs, installed as the package `kernelarc.conf` (see pyproject's package-dir)."""
