import os


def run(x, y):
    os._exit(3)
