"""`Worker`: Python functions as an agent.

    worker = Worker("http://localhost:8080", token=CODER_TOKEN)

    @worker.on_task
    async def count(task: TaskContext) -> dict[str, int]:
        await task.progress({"step": "counting"})
        return {"words": len(task.description.split())}

    worker.run()   # until SIGINT or SIGTERM

The worker listens on the WebSocket hub (`AsyncClient.listen`), runs `on_message`
handlers for inbox entries and `on_task` handlers for the tasks assigned to it — and, with
`claim_offers` (the default), claims the tasks offered to its role and keeps their leases
while the handler runs. At most `concurrency` handlers run at once.

The task protocol's rules, kept for the handler:

* what the handler returns is the task's result (`TaskResponse` `success`, `result_data`);
* `raise TaskFailed(reason, data)` fails it with `{"error": reason, **data}`; any other
  exception fails it with `{"error": "<Type>: <message>"}` (and is logged) — a task never
  stays in progress because its handler broke;
* `await task.handoff(agent, reason)` hands it on, after which the return value is
  ignored; `await task.ask(question)` asks the originator and returns the answer;
* a handler still running when the worker is stopped past its `shutdown_grace` is
  cancelled and reports nothing: its frame was not acked, so the next start of the worker
  runs it again (a claimed task's lease runs out and the role gets it back). Handlers
  should be safe to run twice.

Frames are acked when their handler finishes (the lowest unfinished one holds the ack
back), so a crash loses no work: what was not finished is replayed on the next start.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from . import errors, models
from .client import AsyncClient
from .listen import AsyncListener, Frame

__all__ = ["TaskContext", "TaskFailed", "Worker"]

log = logging.getLogger("switchboard_client.worker")

MessageHandler = Callable[[models.MessageView], Awaitable[None]]
TaskHandler = Callable[["TaskContext"], Awaitable[Any]]
H = TypeVar("H", bound=Callable[..., Awaitable[Any]])


class TaskFailed(Exception):
    """Raised by a task handler to fail its task with a reason (and more data)."""

    def __init__(self, reason: str, data: Mapping[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.data = dict(data or {})


class TaskContext:
    """One task as its handler sees it: the `TaskRequest`'s fields and what the assignee
    may do with it."""

    def __init__(self, worker: Worker, task: models.TaskRequest | models.Task) -> None:
        self._worker = worker
        self.client: AsyncClient = worker.client
        self.task_id: str = task.task_id or ""
        self.description: str = task.description
        self.data: dict[str, Any] = dict(task.data or {})
        self.originating_agent_id: str = task.originating_agent_id
        self.priority: str | None = task.priority
        self.handed_off = False

    async def progress(self, result_data: Any = None) -> None:
        """Reports progress (`TaskResponse` `in-progress`); it also renews a claim's lease."""
        await self.client.report_task(
            task_id=self.task_id, status="in-progress", result_data=result_data
        )

    async def ask(self, question: str, *, timeout: float | None = None) -> str:
        """Asks the originator (`ClarificationRequest`) and returns its answer."""
        return await self._worker._ask(self.task_id, question, timeout)

    async def handoff(self, new_agent_id: str, reason: str) -> None:
        """Hands the task to another agent; the handler's return value is then ignored."""
        await self.client.handoff_task(
            task_id=self.task_id, new_agent_id=new_agent_id, reason=reason
        )
        self.handed_off = True


class Worker:
    """An agent made of handlers; see the module for the rules it keeps."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        concurrency: int = 8,
        claim_offers: bool = True,
        lease_seconds: int = 300,
        shutdown_grace: float = 10.0,
        since: int | None = None,
    ) -> None:
        # An agent token: its task reports and questions go as frames (docs/python.md).
        self.client = AsyncClient(url, token, transport="websocket")
        self.concurrency = concurrency
        self.claim_offers = claim_offers
        self.lease_seconds = lease_seconds
        self.shutdown_grace = shutdown_grace
        self._since = since
        self._message_handler: MessageHandler | None = None
        self._task_handler: TaskHandler | None = None
        self._listener: AsyncListener | None = None
        self._stopping = asyncio.Event() if _has_loop() else None
        self._running: dict[str, asyncio.Task[None]] = {}
        self._finished: OrderedDict[str, None] = OrderedDict()
        self._answers: dict[str, asyncio.Future[str]] = {}
        self._in_flight: set[int] = set()
        self._dispatched = 0
        self._acked = 0

    @property
    def agent_id(self) -> str | None:
        return self._listener.agent_id if self._listener is not None else None

    def on_message(self, handler: H) -> H:
        """Registers `async def handler(message: MessageView)` for inbox entries."""
        self._message_handler = _coroutine(handler)
        return handler

    def on_task(self, handler: H) -> H:
        """Registers `async def handler(task: TaskContext)` for tasks (see the module)."""
        self._task_handler = _coroutine(handler)
        return handler

    def run(self) -> None:
        """Runs until SIGINT or SIGTERM, then finishes what runs (up to `shutdown_grace`)."""
        asyncio.run(self.serve(signals=True))

    def stop(self) -> None:
        """Asks a running `serve()` to stop (from the worker's event loop)."""
        if self._stopping is not None:
            self._stopping.set()

    async def serve(self, *, signals: bool = False) -> None:
        """Runs until `stop()` (or a signal, with `signals=True`)."""
        self._stopping = asyncio.Event()
        if signals:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self._stopping.set)
        slots = asyncio.Semaphore(self.concurrency)
        self._listener = self.client.listen(since=self._since, auto_ack=False)
        reader = asyncio.create_task(self._read(slots))
        stopped = asyncio.create_task(self._stopping.wait())
        try:
            await asyncio.wait({reader, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            await self._drain()
            await self._listener.close()
            await self.client.aclose()
        if reader.done() and not reader.cancelled() and reader.exception() is not None:
            raise reader.exception()  # type: ignore[misc]

    async def _drain(self) -> None:
        running = [t for t in self._running.values() if not t.done()]
        if running:
            _, late = await asyncio.wait(running, timeout=self.shutdown_grace)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        if self._listener is not None:
            await self._ack()

    async def _read(self, slots: asyncio.Semaphore) -> None:
        assert self._listener is not None
        async for frame in self._listener:
            self._in_flight.add(frame.seq)
            self._dispatched = frame.seq
            job = self._job(frame)
            if job is None:
                await self._done(frame.seq)
                continue
            key, work = job
            await slots.acquire()
            self._running[key] = asyncio.create_task(self._run(key, frame.seq, work, slots))

    def _job(self, frame: Frame) -> tuple[str, Callable[[], Awaitable[None]]] | None:
        """What a frame asks the worker to run, keyed so one thing never runs twice."""
        if frame.type == "ClarificationResponse":
            answer = self._answers.pop(str(frame.data.get("task_id")), None)
            if answer is not None and not answer.done():
                answer.set_result(str(frame.data.get("answer", "")))
            return None
        if frame.type == "message" and self._message_handler is not None:
            message = frame.message
            handler = self._message_handler
            if message is None:
                return None
            return f"message:{message.message_id}", lambda: handler(message)
        if self._task_handler is None:
            return None
        task_id = str(frame.data.get("task_id", ""))
        if task_id in self._running or task_id in self._finished:
            return None
        if frame.type == "TaskRequest" and frame.data.get("assignee_agent_id") in (
            None,
            self.agent_id,
        ):
            request = frame.parse(models.TaskRequest)
            return task_id, lambda: self._work(TaskContext(self, request), claimed=False)
        if frame.type == "TaskOffer" and self.claim_offers:
            return task_id, self._claim
        return None

    async def _claim(self) -> None:
        claimed = await self.client.claim_task(wait_seconds=0, lease_seconds=self.lease_seconds)
        if claimed.task is not None and claimed.task.task_id not in self._finished:
            await self._work(TaskContext(self, claimed.task), claimed=True)

    async def _run(
        self, key: str, seq: int, work: Callable[[], Awaitable[None]], slots: asyncio.Semaphore
    ) -> None:
        try:
            await work()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("handler for %s failed", key)
        finally:
            slots.release()
            self._running.pop(key, None)
            self._remember(key)
        await self._done(seq)

    def _remember(self, key: str) -> None:
        self._finished[key] = None
        while len(self._finished) > 10_000:
            self._finished.popitem(last=False)

    async def _work(self, task: TaskContext, *, claimed: bool) -> None:
        handler = self._task_handler
        assert handler is not None
        keeper = asyncio.create_task(self._keep_lease(task.task_id)) if claimed else None
        status: models.TaskResponseStatus
        data: Any
        try:
            data = await handler(task)
            status = "success"
        except TaskFailed as failure:
            status, data = "failed", {"error": failure.reason, **failure.data}
        except Exception as failure:
            log.exception("task %s failed in its handler", task.task_id)
            status, data = "failed", {"error": f"{type(failure).__name__}: {failure}"}
        finally:
            if keeper is not None:
                keeper.cancel()
        self._remember(task.task_id)
        if task.handed_off:
            return
        try:
            await self.client.report_task(task_id=task.task_id, status=status, result_data=data)
        except errors.ConflictError as refused:
            # Finished already (a replay after a crash) or canceled meanwhile.
            log.info("task %s not reported: %s", task.task_id, refused)

    async def _keep_lease(self, task_id: str) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            await self.client.extend_claim(task_id=task_id, lease_seconds=self.lease_seconds)

    async def _ask(self, task_id: str, question: str, timeout: float | None) -> str:
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._answers[task_id] = answer
        asked = await self.client.request_clarification(task_id=task_id, question=question)
        open_round = asked.task.open_clarification
        wanted = open_round.clarification_id if open_round is not None else None
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        try:
            while True:
                # The push answers at once; a read of the task every two seconds is the
                # backstop when every slot is busy and the frame waits behind them.
                try:
                    return await asyncio.wait_for(asyncio.shield(answer), 2.0)
                except asyncio.TimeoutError:
                    pass
                task = (await self.client.get_task(task_id=task_id)).task
                for round_ in task.context:
                    if round_.clarification_id == wanted:
                        return round_.answer
                if deadline is not None and loop.time() > deadline:
                    raise TimeoutError(f"no answer to {question!r} within {timeout} s")
        finally:
            self._answers.pop(task_id, None)

    async def _done(self, seq: int) -> None:
        self._in_flight.discard(seq)
        await self._ack()

    async def _ack(self) -> None:
        upto = min(self._in_flight) - 1 if self._in_flight else self._dispatched
        if upto > self._acked and self._listener is not None:
            self._acked = upto
            await self._listener.ack(upto)


def _coroutine(handler: H) -> Any:
    if not inspect.iscoroutinefunction(handler):
        raise TypeError(f"{handler.__name__} must be an `async def` function")
    return handler


def _has_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
