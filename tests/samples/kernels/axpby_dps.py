def run(x, y, alpha, out, flat):
    out.copy_(alpha * x + y)
    flat.copy_(out.reshape(-1))
