"""Ignores every polite signal, then sleeps: only SIGKILL ends it."""

import signal
import time

for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1):
    signal.signal(_sig, signal.SIG_IGN)


def run(x, y):
    while True:
        time.sleep(1)
