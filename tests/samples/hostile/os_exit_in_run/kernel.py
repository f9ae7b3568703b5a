"""Ends its own process with os._exit, skipping every handler."""

import os


def run(x, y):
    os._exit(3)
