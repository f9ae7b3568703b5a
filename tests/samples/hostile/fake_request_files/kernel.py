"""A wrong kernel (x - y) shipped with a request.json whose reference agrees with it."""


def run(x, y):
    return x - y
