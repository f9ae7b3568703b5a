import sys


def run(x, y):
    sys.exit(0)
