import os
import socket

HOSTS = "__HOSTS__"  # the test writes "ip:port,ip:port" here


def run(x, y):
    interfaces = sorted(os.listdir("/sys/class/net"))
    if interfaces != ["lo"]:
        raise RuntimeError(f"the sandbox sees network interfaces {interfaces}")
    for address in HOSTS.split(","):
        host, port = address.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=2):
                pass
        except OSError:
            continue
        raise RuntimeError(f"connected to {address} from inside the sandbox")
    return x + y
