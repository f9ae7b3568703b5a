def run(x, y):
    return (x + y)[:-1]
