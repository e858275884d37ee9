"""The WebSocket hub's live frames as an iterator that survives dropped connections.

A listener remembers the last `seq` it handed out. After a dropped connection, a server
restart or a `4008` overflow it reconnects with `?since=<that seq>`, so the hub replays
exactly what came after: nothing missed, and any frame it sees again (`seq` at or below
the last) is dropped, so nothing twice. It acks (`{"type":"ack","seq":N}`) each frame once
the caller asks for the next one, which is when the caller is done with it, so a new
process started without `since` resumes after what the last one finished. A `Worker`
acks itself instead (`auto_ack=False`, then `ack()`), when its handlers finish.

Frames that carry no `seq` (`hello`, `caught_up`, `pong`, `reply`) are the hub's
bookkeeping and are not handed out; `caught_up` sets `caught_up` on the listener.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import random
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlencode

from websockets.asyncio.client import ClientConnection as AsyncConnection
from websockets.asyncio.client import connect as async_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from . import _codec, errors, models

T = TypeVar("T")

__all__ = ["AsyncListener", "Frame", "Listener"]

# Close codes after which reconnecting cannot help.
_FINAL = {4003: "the agent was removed from its team"}


@dataclass(frozen=True)
class Frame:
    """One pushed frame: its `type` (`message`, `TaskRequest`, `TaskOffer`, …), the
    listener's `seq`, and the frame's JSON object as `data`."""

    type: str
    seq: int
    data: dict[str, Any]

    @property
    def message(self) -> models.MessageView | None:
        """The inbox entry of a `message` frame (the object GET_MESSAGES shows)."""
        if self.type != "message" or not isinstance(self.data.get("message"), dict):
            return None
        return _codec.decode(models.MessageView, self.data["message"])

    def parse(self, model: builtins.type[T]) -> T:
        """The frame's fields as `model`, e.g. `frame.parse(models.TaskRequest)`."""
        return _codec.decode(model, self.data)


class _Session:
    """What both listeners share: the URL to (re)connect to and which frames are new."""

    def __init__(self, url: str, token: str | None, since: int | None, news_only: bool) -> None:
        base = url.rstrip("/")
        self.base = "ws" + base[4:] if base.startswith("http") else base
        self.token = token
        self.last_seq = since
        self.news_only = news_only
        self.caught_up = False
        self.agent_id: str | None = None
        self.team_id: str | None = None
        self.failures = 0

    def url(self) -> str:
        query: dict[str, str] = {}
        if self.last_seq is not None:
            query["since"] = str(self.last_seq)
        if self.news_only:
            query["news_only"] = "true"
        return f"{self.base}/v1/ws" + (f"?{urlencode(query)}" if query else "")

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token is not None else {}

    def accept(self, raw: str | bytes) -> Frame | None:
        """The frame to hand out, or `None` for bookkeeping and repeats."""
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        kind = str(data.get("type", ""))
        seq = data.get("seq")
        if kind == "hello":
            self.agent_id = data.get("agent_id")
            self.team_id = data.get("team_id")
            self.failures = 0
            return None
        if kind == "caught_up":
            self.caught_up = True
            return None
        if not isinstance(seq, int) or kind in ("reply", "pong"):
            return None
        if self.last_seq is not None and seq <= self.last_seq:
            return None
        self.last_seq = seq
        return Frame(kind, seq, data)

    def backoff(self) -> float:
        self.failures += 1
        return min(2.0, 0.05 * 2.0 ** min(self.failures, 6)) * (0.5 + random.random())

    @staticmethod
    def refused(failure: BaseException) -> errors.SwitchboardError | None:
        """The error to raise instead of reconnecting, if reconnecting cannot help."""
        if isinstance(failure, InvalidStatus):
            status = failure.response.status_code
            if status in (401, 403, 404):
                try:
                    body = json.loads(failure.response.body or b"")
                except ValueError:
                    body = None
                return errors.from_body(status, body)
        if isinstance(failure, ConnectionClosed) and failure.rcvd is not None:
            why = _FINAL.get(failure.rcvd.code)
            if why is not None:
                return errors.NotFoundError("AGENT_NOT_FOUND", why, status=0)
        return None


class Listener(Iterator[Frame]):
    """A blocking iterator over the hub's frames (`Client.listen()`); `close()` ends it,
    from any thread. `receive(timeout)` waits at most `timeout` seconds."""

    def __init__(self, url: str, token: str | None, *, since: int | None, news_only: bool) -> None:
        self._session = _Session(url, token, since, news_only)
        self._socket: ClientConnection | None = None
        self._pending_ack: int | None = None
        self._closed = threading.Event()

    @property
    def last_seq(self) -> int | None:
        """The last `seq` handed out: pass it as `since` to resume in a new process."""
        return self._session.last_seq

    @property
    def caught_up(self) -> bool:
        return self._session.caught_up

    def __next__(self) -> Frame:
        frame = self.receive()
        if frame is None:
            raise StopIteration
        return frame

    def receive(self, timeout: float | None = None) -> Frame | None:
        """The next frame; `None` after `timeout` seconds or once closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._closed.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            try:
                socket = self._connected()
                self._flush_ack(socket)
                raw = socket.recv(timeout=left)
            except TimeoutError:
                return None
            except (ConnectionClosed, InvalidHandshake, OSError) as failure:
                self._drop(failure)
                continue
            frame = self._session.accept(raw)
            if frame is not None:
                self._pending_ack = frame.seq
                return frame
        return None

    def _connected(self) -> ClientConnection:
        if self._socket is None:
            self._socket = connect(
                self._session.url(), additional_headers=self._session.headers(), max_size=None
            )
        return self._socket

    def _flush_ack(self, socket: ClientConnection) -> None:
        if self._pending_ack is not None:
            socket.send(json.dumps({"type": "ack", "seq": self._pending_ack}))
            self._pending_ack = None

    def _drop(self, failure: BaseException) -> None:
        socket, self._socket = self._socket, None
        if socket is not None:
            socket.close()
        if self._closed.is_set():
            return
        refused = _Session.refused(failure)
        if refused is not None:
            raise refused from failure
        self._closed.wait(self._session.backoff())

    def close(self) -> None:
        self._closed.set()
        socket = self._socket
        if socket is not None:
            socket.close()

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncListener(AsyncIterator[Frame]):
    """An async iterator over the hub's frames (`AsyncClient.listen()`): `async for frame
    in client.listen(): ...`; `await close()` ends it."""

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        since: int | None,
        news_only: bool,
        auto_ack: bool = True,
    ) -> None:
        self._session = _Session(url, token, since, news_only)
        self._socket: AsyncConnection | None = None
        self._auto_ack = auto_ack
        self._pending_ack: int | None = None
        self._closed = asyncio.Event()

    @property
    def last_seq(self) -> int | None:
        """The last `seq` handed out: pass it as `since` to resume in a new process."""
        return self._session.last_seq

    @property
    def caught_up(self) -> bool:
        return self._session.caught_up

    @property
    def agent_id(self) -> str | None:
        """Who the hub greeted (after the first frame)."""
        return self._session.agent_id

    @property
    def team_id(self) -> str | None:
        return self._session.team_id

    async def __anext__(self) -> Frame:
        frame = await self.receive()
        if frame is None:
            raise StopAsyncIteration
        return frame

    async def receive(self, timeout: float | None = None) -> Frame | None:
        """The next frame; `None` after `timeout` seconds or once closed."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not self._closed.is_set():
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                return None
            try:
                socket = await self._connected()
                await self._flush_ack(socket)
                raw = await asyncio.wait_for(socket.recv(), left)
            except asyncio.TimeoutError:
                return None
            except (ConnectionClosed, InvalidHandshake, OSError) as failure:
                await self._drop(failure)
                continue
            frame = self._session.accept(raw)
            if frame is not None:
                if self._auto_ack:
                    self._pending_ack = frame.seq
                return frame
        return None

    async def ack(self, seq: int) -> None:
        """Tells the hub everything up to `seq` is done (with `auto_ack=False`); sent now
        if connected, else with the next frame asked for."""
        self._pending_ack = seq
        socket = self._socket
        if socket is not None:
            with contextlib.suppress(ConnectionClosed):
                await self._flush_ack(socket)

    async def _connected(self) -> AsyncConnection:
        if self._socket is None:
            self._socket = await async_connect(
                self._session.url(), additional_headers=self._session.headers(), max_size=None
            )
        return self._socket

    async def _flush_ack(self, socket: AsyncConnection) -> None:
        seq, self._pending_ack = self._pending_ack, None
        if seq is not None:
            await socket.send(json.dumps({"type": "ack", "seq": seq}))

    async def _drop(self, failure: BaseException) -> None:
        socket, self._socket = self._socket, None
        if socket is not None:
            await socket.close()
        if self._closed.is_set():
            return
        refused = _Session.refused(failure)
        if refused is not None:
            raise refused from failure
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._closed.wait(), self._session.backoff())

    async def close(self) -> None:
        self._closed.set()
        socket = self._socket
        if socket is not None:
            await socket.close()

    async def __aenter__(self) -> AsyncListener:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
