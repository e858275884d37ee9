"""A real Switchboard server for the tests: the binary `cargo` built, on a free port,
with a fresh SQLite file, started, killed and restarted as a test needs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[3]
ADMIN = "python-client-admin-token"


def binary() -> str:
    """`SWITCHBOARD_BIN` (the Rust test that runs pytest sets it), else the debug build."""
    return os.environ.get("SWITCHBOARD_BIN", str(ROOT / "target" / "debug" / "switchboard"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """One server process on one database file; `restart()` keeps both port and file."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.database = folder / "switchboard.db"
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        self._log = open(self.folder / "server.log", "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [
                binary(),
                "serve",
                "--listen",
                f"127.0.0.1:{self.port}",
                "--database",
                str(self.database),
                "--admin-token",
                ADMIN,
                # An outside A2A agent on this machine (test_methods.py registers one).
                "--allow-private-callbacks",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log()}")
            try:
                urllib.request.urlopen(self.url + "/readyz", timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the server never got ready: {self.log()}") from None
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no shutdown, as a crash would."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)
            self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def log(self) -> str:
        path = self.folder / "server.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""
