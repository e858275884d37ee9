"""`Client` (blocking) and `AsyncClient` (asyncio): every REST operation as a method.

Both share one policy, in `_Policy`: what a request looks like, when a failed one is sent
again, and how an answer becomes a typed object or a `SwitchboardError`. A request is
retried only when sending it twice cannot do anything twice: a connection that was never
made, a read (`GET`), or a send that carries an idempotency key (the client makes one for
every send, so a retried send is stored once — the server answers the first one's result).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
import uuid
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Literal, TypeVar

import httpx

from . import _codec, errors
from ._operations import AsyncOperations, Operations
from ._socket import FrameSocket
from .listen import AsyncListener, Listener

T = TypeVar("T")

# Connections per httpx pool in `AsyncClient` (see there).
_LANE = 8

__all__ = ["AsyncClient", "Client"]


class _Policy:
    """What `Client` and `AsyncClient` share: the request, the retry rule, the answer."""

    def __init__(self, url: str, token: str | None, retries: int, keys: bool = True) -> None:
        self.url = url.rstrip("/")
        self.keys = keys
        self.token = token
        self.retries = retries
        self._prefix = uuid.uuid4().hex
        self._sends = itertools.count(1)

    def headers(self, idempotency_key: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        return headers

    def key(self, idempotent: bool, given: str | None) -> str | None:
        """The idempotency key of a send: the caller's, or this client's random prefix
        and a counter (unique without asking the OS for randomness per send)."""
        if not idempotent or (given is None and not self.keys):
            return given
        return given if given is not None else f"py-{self._prefix}-{next(self._sends)}"

    def delay(
        self, attempt: int, failure: BaseException | httpx.Response, safe: bool
    ) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or `None` to give up."""
        if attempt >= self.retries:
            return None
        backoff = min(2.0, 0.1 * 2.0**attempt) * (0.5 + random.random())
        if isinstance(failure, httpx.Response):
            if failure.status_code not in (429, 503) or not safe:
                return None
            after = failure.headers.get("Retry-After")
            if after is not None:
                try:
                    wait = float(after)
                except ValueError:
                    return None
                # A budget that refills in minutes is the caller's to wait for, not ours.
                return wait if wait <= 5 else None
            return backoff
        if isinstance(failure, (httpx.ConnectError, httpx.ConnectTimeout)):
            return backoff
        return backoff if safe and isinstance(failure, httpx.TransportError) else None

    @staticmethod
    def answer(response: httpx.Response, answer: type[T]) -> T:
        try:
            data: Any = response.json() if response.content else None
        except json.JSONDecodeError:
            data = None
        if response.status_code >= 400:
            raise errors.from_body(response.status_code, data)
        return _codec.decode(answer, data)


class Client(Operations):
    """A blocking client: `Client("http://localhost:8080", token=...)`.

    Use it as a context manager (or call `close()`) so its connections are released.
    `retries` bounds how often a safe request is sent again (see the module).
    `idempotency_keys=False` sends without a key unless one is given: the server then
    does less per send (no stored answer), and a send whose answer was lost is not
    retried.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 70.0,
        retries: int = 3,
        idempotency_keys: bool = True,
    ) -> None:
        self._policy = _Policy(url, token, retries, idempotency_keys)
        # 70 s: a long poll may wait 60.
        self._http = httpx.Client(base_url=self._policy.url, timeout=timeout)

    @property
    def url(self) -> str:
        return self._policy.url

    @property
    def token(self) -> str | None:
        return self._policy.token

    def _call(
        self,
        verb: str,
        path: str,
        answer: type[T],
        *,
        query: Mapping[str, Any] | None,
        body: Mapping[str, Any] | None,
        idempotent: bool,
        idempotency_key: str | None = None,
        frame: tuple[str, Mapping[str, str]] | None = None,
    ) -> T:
        key = self._policy.key(idempotent, idempotency_key)
        headers = self._policy.headers(key)
        params = _codec.query(query) if query else None
        payload = _codec.body(body) if body is not None else None
        safe = verb == "GET" or key is not None
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    verb, path, params=params, json=payload, headers=headers
                )
            except httpx.TransportError as failure:
                wait = self._policy.delay(attempt, failure, safe)
                if wait is None:
                    raise errors.ConnectionFailed(f"{verb} {path}: {failure!r}") from failure
            else:
                wait = self._policy.delay(attempt, response, safe)
                if wait is None or response.status_code < 400:
                    return self._policy.answer(response, answer)
            time.sleep(wait)
            attempt += 1

    def listen(self, *, since: int | None = None, news_only: bool = False) -> Listener:
        """The live frames of the WebSocket hub, resumed after a dropped connection or a
        server restart with nothing missed and nothing twice (see `Listener`)."""
        return Listener(self._policy.url, self._policy.token, since=since, news_only=news_only)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClient(AsyncOperations):
    """An asyncio client: `AsyncClient("http://localhost:8080", token=...)`, each method
    awaited. Use it as an async context manager (or await `aclose()`).

    `transport="websocket"` sends the operations that are WebSocket frames (messages,
    tasks, leases, approvals: docs/websocket.md) over one connection, twenty times
    cheaper per call in Python than an HTTP request; the others still go over HTTP. The
    hub is the agents': it takes an agent token (a team key's client stays on HTTP).
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 70.0,
        retries: int = 3,
        max_connections: int = 100,
        transport: Literal["http", "websocket"] = "http",
        idempotency_keys: bool = True,
    ) -> None:
        self._policy = _Policy(url, token, retries, idempotency_keys)
        # Over "websocket", the operations that are frames (messages, tasks, leases,
        # approvals) go over one connection; the team's and the admin's over HTTP.
        self._frames = FrameSocket(url, token, timeout) if transport == "websocket" else None
        # Lanes of at most eight connections: httpx's pool looks at every connection it
        # holds on every request, so one pool of 64 spends more time choosing a connection
        # than sending (118 sends/s against 443 with eight pools of eight, measured).
        lanes = max(1, -(-max_connections // _LANE))
        per_lane = -(-max_connections // lanes)
        limits = httpx.Limits(max_connections=per_lane, max_keepalive_connections=per_lane)
        self._lanes = [
            httpx.AsyncClient(base_url=self._policy.url, timeout=timeout, limits=limits)
            for _ in range(lanes)
        ]
        self._next_lane = itertools.cycle(self._lanes)

    @property
    def url(self) -> str:
        return self._policy.url

    @property
    def token(self) -> str | None:
        return self._policy.token

    async def _call(
        self,
        verb: str,
        path: str,
        answer: type[T],
        *,
        query: Mapping[str, Any] | None,
        body: Mapping[str, Any] | None,
        idempotent: bool,
        idempotency_key: str | None = None,
        frame: tuple[str, Mapping[str, str]] | None = None,
    ) -> T:
        key = self._policy.key(idempotent, idempotency_key)
        if self._frames is not None and frame is not None:
            return await self._call_frame(verb, frame, answer, query, body, key)
        headers = self._policy.headers(key)
        params = _codec.query(query) if query else None
        payload = _codec.body(body) if body is not None else None
        safe = verb == "GET" or key is not None
        attempt = 0
        while True:
            try:
                response = await next(self._next_lane).request(
                    verb, path, params=params, json=payload, headers=headers
                )
            except httpx.TransportError as failure:
                wait = self._policy.delay(attempt, failure, safe)
                if wait is None:
                    raise errors.ConnectionFailed(f"{verb} {path}: {failure!r}") from failure
            else:
                wait = self._policy.delay(attempt, response, safe)
                if wait is None or response.status_code < 400:
                    return self._policy.answer(response, answer)
            await asyncio.sleep(wait)
            attempt += 1

    async def _call_frame(
        self,
        verb: str,
        frame: tuple[str, Mapping[str, str]],
        answer: type[T],
        query: Mapping[str, Any] | None,
        body: Mapping[str, Any] | None,
        key: str | None,
    ) -> T:
        assert self._frames is not None
        frame_type, ids = frame
        fields: dict[str, Any] = {**ids, **_codec.body(query or {}), **_codec.body(body or {})}
        if key is not None:
            fields["idempotency_key"] = key
        safe = verb == "GET" or key is not None
        attempt = 0
        while True:
            try:
                return _codec.decode(answer, await self._frames.call(frame_type, fields))
            except errors.ConnectionFailed:
                # The frame may have reached the server before the connection went:
                # sent again only when that cannot do it twice (a read, or a keyed send).
                wait = self._policy.delay(attempt, httpx.ReadError("closed"), safe)
                if wait is None:
                    raise
            await asyncio.sleep(wait)
            attempt += 1

    def listen(
        self, *, since: int | None = None, news_only: bool = False, auto_ack: bool = True
    ) -> AsyncListener:
        """The live frames of the WebSocket hub (see `AsyncListener`)."""
        return AsyncListener(
            self._policy.url,
            self._policy.token,
            since=since,
            news_only=news_only,
            auto_ack=auto_ack,
        )

    async def aclose(self) -> None:
        if self._frames is not None:
            await self._frames.close()
        for lane in self._lanes:
            await lane.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
