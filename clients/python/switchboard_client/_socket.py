"""Operations as frames over one WebSocket (`AsyncClient(..., transport="websocket")`).

One connection carries every call: a frame with a `request_id`, answered by a `reply`
with the same id — no HTTP request and response to build and parse per call, which is
most of what a Python client spends per send. The hub also pushes the agent's inbox
entries on this connection; they are read and dropped here (`listen()` is for those).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Mapping
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from . import errors


def _expire(answer: asyncio.Future[dict[str, Any]]) -> None:
    if not answer.done():
        answer.set_exception(asyncio.TimeoutError())


class FrameSocket:
    """A lazily opened connection; a dropped one fails the calls in flight
    (`ConnectionFailed`) and is opened again by the next call."""

    def __init__(self, url: str, token: str | None, timeout: float) -> None:
        base = url.rstrip("/")
        self._url = ("ws" + base[4:] if base.startswith("http") else base) + "/v1/ws"
        self._headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        self._timeout = timeout
        self._socket: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._opening = asyncio.Lock()
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)

    async def call(self, frame_type: str, fields: Mapping[str, Any]) -> Any:
        """The `result` of the reply to the frame, or its refusal raised."""
        socket = await self._open()
        request_id = str(next(self._ids))
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = answer
        # A timer per call, not a task (`wait_for`): most of a call's cost otherwise.
        timer = asyncio.get_running_loop().call_later(self._timeout, _expire, answer)
        try:
            await socket.send(json.dumps({"type": frame_type, "request_id": request_id, **fields}))
            reply = await answer
        except (ConnectionClosed, OSError, asyncio.TimeoutError) as failure:
            raise errors.ConnectionFailed(f"{frame_type}: {failure!r}") from failure
        finally:
            timer.cancel()
            self._pending.pop(request_id, None)
        if reply.get("ok"):
            return reply.get("result")
        body = reply.get("error")
        code = body.get("error_code") if isinstance(body, dict) else None
        raise errors.from_body(errors.STATUS.get(str(code), 400), body)

    async def _open(self) -> ClientConnection:
        async with self._opening:
            if self._socket is None:
                try:
                    self._socket = await connect(
                        self._url, additional_headers=self._headers, max_size=None
                    )
                except InvalidStatus as refused:
                    try:
                        body = json.loads(refused.response.body or b"")
                    except ValueError:
                        body = None
                    raise errors.from_body(refused.response.status_code, body) from refused
                except (InvalidHandshake, OSError) as failure:
                    raise errors.ConnectionFailed(f"{self._url}: {failure!r}") from failure
                self._reader = asyncio.create_task(self._read(self._socket))
            return self._socket

    async def _read(self, socket: ClientConnection) -> None:
        try:
            async for raw in socket:
                frame = json.loads(raw)
                if not isinstance(frame, dict) or "request_id" not in frame:
                    continue
                if frame.get("type") in ("reply", "ErrorMessage"):
                    if frame.get("type") == "ErrorMessage":
                        frame = {"ok": False, "error": frame}
                    answer = self._pending.get(str(frame.get("request_id")))
                    if answer is not None and not answer.done():
                        answer.set_result(frame)
        except (ConnectionClosed, ValueError):
            pass
        finally:
            if self._socket is socket:
                self._socket = None
            for answer in self._pending.values():
                if not answer.done():
                    answer.set_exception(ConnectionClosed(None, None))

    async def close(self) -> None:
        socket, self._socket = self._socket, None
        if socket is not None:
            await socket.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
