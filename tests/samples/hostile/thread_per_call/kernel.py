"""A correct kernel that leaves a sleeping daemon thread behind on every call."""

import threading
import time


def run(x, y):
    threading.Thread(target=time.sleep, args=(10,), daemon=True).start()
    return x + y
