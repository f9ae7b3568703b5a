import subprocess
import sys


def run(x, y):
    # A background child too, so the test can check that the whole process group dies.
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    while True:
        pass
