def run(x, y):
    return x + y + 0.5
