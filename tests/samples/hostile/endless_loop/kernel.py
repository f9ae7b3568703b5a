"""Spins forever in every call."""


def run(x, y):
    while True:
        pass
