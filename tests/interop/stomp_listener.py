"""The listener both STOMP scripts use: everything a connection received, and a way to
wait for it (stomp.py calls listeners on its receiver thread)."""

import threading

import stomp


class Listener(stomp.ConnectionListener):
    """Frames as they arrived: MESSAGEs, receipt ids, ERROR messages, heart-beats."""

    def __init__(self, name="connection"):
        self.name = name
        self.messages = []
        self.receipts = []
        self.errors = []
        self.heartbeats = 0
        self.disconnected = False
        self.cond = threading.Condition()

    def _add(self, attr, value):
        with self.cond:
            getattr(self, attr).append(value)
            self.cond.notify_all()

    def on_message(self, frame):
        self._add("messages", frame)

    def on_receipt(self, frame):
        self._add("receipts", frame.headers["receipt-id"])

    def on_error(self, frame):
        self._add("errors", frame.headers.get("message", ""))

    def on_heartbeat(self):
        with self.cond:
            self.heartbeats += 1
            self.cond.notify_all()

    def on_disconnected(self):
        with self.cond:
            self.disconnected = True
            self.cond.notify_all()

    def wait(self, predicate, what, timeout=10.0):
        with self.cond:
            if not self.cond.wait_for(lambda: predicate(self), timeout):
                raise AssertionError(f"{self.name}: timed out waiting for {what}: {vars(self)}")
