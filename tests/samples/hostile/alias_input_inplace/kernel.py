"""Returns its first input itself, after adding the second into it (right values, an alias)."""


def run(x, y):
    x.add_(y)
    return x
