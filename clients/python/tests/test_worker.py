"""`Worker`: tasks answered at volume, every way a handler ends, claims, messages, and a
clean stop on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from switchboard_client import AsyncClient, Client, TaskContext, TaskFailed, Worker, models

from .conftest import Team, make_team
from .server import ROOT, Server


@contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    """The worker serving in a thread of its own until the block ends."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(worker.serve(),))
    thread.start()
    try:
        yield worker
    finally:
        loop.call_soon_threadsafe(worker.stop)
        thread.join(timeout=30)
        loop.close()
    assert not thread.is_alive()


def wait_for(check: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "in time"
        time.sleep(0.05)


def task_of(team: Team, agent: str, task_id: str) -> models.Task:
    with team.client(agent) as client:
        return client.get_task(task_id=task_id).task


def test_a_worker_answers_1000_tasks_from_8_originators(server: Server) -> None:
    originators = [f"o{n}" for n in range(8)]
    team = make_team(
        server.url,
        {"coder": ("Coder", ["python"]), **{o: ("Planner", ["planning"]) for o in originators}},
    )
    worker = Worker(team.url, team.tokens["coder"], concurrency=16)

    @worker.on_task
    async def double(task: TaskContext) -> dict[str, Any]:
        return {"double": task.data["n"] * 2, "by": "coder"}

    async def originate(agent: str) -> list[str]:
        async with AsyncClient(team.url, token=team.tokens[agent]) as client:
            ids: list[str] = []
            for n in range(125):
                submitted = await client.submit_task(
                    task_id=f"{agent}-{n}",
                    originating_agent_id=agent,
                    description="double it",
                    data={"n": n},
                    target_agent_id="coder",
                )
                ids.append(submitted.task_response.task_id)
            return ids

    async def submit_all() -> list[list[str]]:
        return await asyncio.gather(*(originate(o) for o in originators))

    with running(worker):
        submitted = asyncio.run(submit_all())
        assert sum(len(ids) for ids in submitted) == 1000

        def all_done() -> bool:
            done = 0
            with Client(team.url, token=team.team_key) as operator:
                cursor: str | None = None
                while True:
                    page = operator.team_tasks(
                        team_id=team.team_id, status="success", limit=100, cursor=cursor
                    )
                    done += len(page.tasks)
                    cursor = page.next_cursor
                    if cursor is None:
                        return done == 1000

        wait_for(all_done, 120)
    for agent, ids in zip(originators, submitted, strict=True):
        with team.client(agent) as client:
            for n, task_id in enumerate(ids):
                task = client.get_task(task_id=task_id).task
                assert task.result_data == {"double": n * 2, "by": "coder"}
                # Answered once: one success event, no refused second report.
                events = client.get_task(task_id=task_id).events
                assert [e.kind for e in events].count("succeeded") == 1


def test_ask_fail_and_hand_off(team: Team) -> None:
    worker = Worker(team.url, team.tokens["coder"])

    @worker.on_task
    async def handle(task: TaskContext) -> Any:
        if task.description == "ask":
            zone = await task.ask("Which timezone?", timeout=30)
            await task.progress({"zone": zone})
            return {"zone": zone}
        if task.description == "refuse":
            raise TaskFailed("cannot parse", {"line": 7})
        if task.description == "break":
            raise ValueError("bad input")
        await task.handoff("tester", "tester owns it")
        return {"ignored": True}

    planner = team.client("planner")
    answering = planner.listen()

    def answer_questions() -> None:
        for frame in answering:
            if frame.type == "ClarificationRequest":
                planner.answer_clarification(
                    task_id=str(frame.data["task_id"]),
                    clarification_id=str(frame.data["clarification_id"]),
                    answer="UTC",
                )

    answerer = threading.Thread(target=answer_questions)
    answerer.start()
    try:
        with running(worker):
            for task_id in ("ask", "refuse", "break", "handoff"):
                planner.submit_task(
                    task_id=task_id,
                    originating_agent_id="planner",
                    description=task_id,
                    target_agent_id="coder",
                )
            wait_for(lambda: task_of(team, "planner", "ask").status == "success")
            wait_for(lambda: task_of(team, "planner", "break").status == "failed")
            wait_for(lambda: task_of(team, "planner", "refuse").status == "failed")
            wait_for(lambda: task_of(team, "planner", "handoff").assignee_agent_id == "tester")
    finally:
        answering.close()
        answerer.join(timeout=10)
        planner.close()
    assert task_of(team, "planner", "ask").result_data == {"zone": "UTC"}
    assert task_of(team, "planner", "refuse").result_data == {
        "error": "cannot parse",
        "line": 7,
    }
    assert task_of(team, "planner", "break").result_data == {"error": "ValueError: bad input"}
    handed = task_of(team, "planner", "handoff")
    assert (handed.status, handed.result_data) == ("in-progress", None)


def test_claims_offers_and_answers_messages(team: Team) -> None:
    worker = Worker(team.url, team.tokens["coder"], lease_seconds=30)
    heard: list[str] = []

    @worker.on_task
    async def handle(task: TaskContext) -> str:
        return f"done: {task.description}"

    @worker.on_message
    async def hear(message: models.MessageView) -> None:
        heard.append(message.content.text)
        await worker.client.respond_to_message(
            original_message_id=message.message_id,
            responder_agent_id="coder",
            response_content={"text": "heard you", "status": "completed"},
        )

    with running(worker), team.client("planner") as planner:
        planner.submit_task(
            task_id="for-any-coder",
            originating_agent_id="planner",
            description="role work",
            assignee_role="Coder",
        )
        sent = planner.send_message(
            sender_agent_id="planner",
            recipient_agent_ids=["coder"],
            message_type="request",
            content={"text": "are you there?"},
            requires_response=True,
        )
        wait_for(lambda: task_of(team, "planner", "for-any-coder").status == "success")
        wait_for(lambda: bool(planner.get_messages(kinds="response").messages))
    task = task_of(team, "planner", "for-any-coder")
    assert (task.result_data, task.assignee_agent_id, task.attempts) == (
        "done: role work",
        "coder",
        1,
    )
    assert heard == ["are you there?"]
    with team.client("planner") as planner:
        (response,) = planner.get_messages(kinds="response").messages
    assert response.in_reply_to == sent.message_id


def test_handlers_must_be_coroutines(team: Team) -> None:
    worker = Worker(team.url, team.tokens["coder"])

    def plain(task: TaskContext) -> None:
        return None

    with pytest.raises(TypeError):
        worker.on_task(plain)  # type: ignore[type-var]


WORKER_SCRIPT = """
import asyncio, sys
from switchboard_client import Worker

worker = Worker(sys.argv[1], sys.argv[2])

@worker.on_task
async def slow(task):
    print("started", flush=True)
    await asyncio.sleep(1.0)
    return {"finished": True}

worker.run()
print("stopped", flush=True)
"""


def test_sigterm_finishes_what_runs_then_stops(own_server: Server) -> None:
    team = make_team(own_server.url)
    process = subprocess.Popen(
        [sys.executable, "-c", WORKER_SCRIPT, team.url, team.tokens["coder"]],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    with team.client("planner") as planner:
        planner.submit_task(
            task_id="slow", originating_agent_id="planner", description="x", target_agent_id="coder"
        )
    assert process.stdout.readline().strip() == "started"
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0
    assert out.strip() == "stopped"
    assert task_of(team, "planner", "slow").result_data == {"finished": True}
