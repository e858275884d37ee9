"""What the toolkit examples share: the coder, a `Worker` that counts words, and the
planner's scripted turns (a stand-in for a model, so the examples run without one).

The examples continue the README's walkthrough: `SB` (the server's URL, default
http://localhost:8080), `PLANNER_TOKEN` and `CODER_TOKEN` in the environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from switchboard_client import TaskContext, Worker

URL = os.environ.get("SB", "http://localhost:8080")


@contextmanager
def coder() -> Iterator[None]:
    """The coder agent, answering tasks on a thread of its own while the block runs."""
    worker = Worker(URL, os.environ["CODER_TOKEN"])

    @worker.on_task
    async def count_words(task: TaskContext) -> dict[str, int]:
        return {"words": len(str(task.data.get("text", "")).split())}

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(worker.serve(),))
    thread.start()
    try:
        yield
    finally:
        loop.call_soon_threadsafe(worker.stop)
        thread.join()
        loop.close()


class Script:
    """The planner's turns, as a model would take them: submit a task to the coder,
    follow it until it is done, then say the result."""

    def __init__(self) -> None:
        self.task_id = f"count-{uuid.uuid4().hex[:8]}"

    def next_call(self, last_tool_answer: str | None) -> tuple[str, dict[str, Any]] | str:
        """The next tool call (name, arguments), or the final answer."""
        if last_tool_answer is None:
            return "submit_task", {
                "task_id": self.task_id,
                "description": "Count the words",
                "target_agent_id": "coder",
                "data": {"text": "to be or not to be"},
            }
        answer = json.loads(last_tool_answer)
        if answer.get("status") == "success":
            return f"The coder counted {answer['result_data']['words']} words."
        time.sleep(0.1)  # a model takes a while too: follow the task, not spin on it
        return "get_task", {"task_id": self.task_id}
