"""Free ports for the servers a benchmark script starts, never one twice per process.

Two servers start at once in these scripts, and the kernel may give a just-closed port to
both: the second then fails to bind, and its client talks to the first server (a run of
instructions.py was lost so).
"""

import socket
import threading

GIVEN: set = set()
GIVING = threading.Lock()


def free_port() -> int:
    with GIVING:
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in GIVEN:
                GIVEN.add(port)
                return port
