"""An outside A2A agent built with the official A2A SDK's server side (`a2a-sdk`, pinned
in requirements.txt), as its users build one: an AgentExecutor behind the SDK's
JSON-RPC and agent-card routes, served by uvicorn. Switchboard registers it by its card
and forwards tasks to it.

Usage: a2a_remote.py [--grows]
Prints {"port": <port>} once it serves on 127.0.0.1:<port>; runs until killed.

What it does with a message: "ask: …" asks "Which language?" (input required) and
completes with {"translated": <answer>} once answered; "fail: …" fails with the rest of
the text; "slow: …" works 7 s and completes with {"done_at": <unix time>}; anything
else reports "working" and completes with {"echo": <text>}. With
--grows, its card gains a skill ("summarise") after it was first read.

GET /traces: the W3C trace context each call came with — the `traceparent` and
`tracestate` HTTP headers of every JSON-RPC POST, and the `metadata` of every message it
executed (tests/it/traces.rs checks that a delegated task continues its trace).
"""

import asyncio
import json
import socket
import sys
import time

import uvicorn
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a.helpers.proto_helpers import (
    new_data_part,
    new_task_from_user_message,
    new_text_message,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    TaskState,
)


# How often each text was executed as a new task: GET /executions (the several-nodes test
# checks that a task given to this agent reaches it once, whatever the number of nodes).
EXECUTIONS = {}
# The trace context calls came with: GET /traces.
HEADERS = []
METADATA = []


class SeenHeaders:
    """ASGI middleware keeping the trace headers of every POST."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            HEADERS.append({k: headers.get(k) for k in ("traceparent", "tracestate")})
        await self.app(scope, receive, send)


class Translator(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        METADATA.append(MessageToDict(context.message.metadata))
        task = context.current_task
        if task is None:
            text = context.get_user_input()
            EXECUTIONS[text] = EXECUTIONS.get(text, 0) + 1
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = context.get_user_input()
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.add_artifact([new_data_part({"translated": text})])
            await updater.complete()
        elif text.startswith("ask:"):
            await updater.requires_input(new_text_message(
                "Which language?", context_id=task.context_id, task_id=task.id))
        elif text.startswith("slow:"):
            await updater.start_work(new_text_message(
                "working", context_id=task.context_id, task_id=task.id))
            await asyncio.sleep(7)
            await updater.add_artifact([new_data_part({"done_at": time.time()})])
            await updater.complete()
        elif text.startswith("fail:"):
            await updater.failed(new_text_message(
                text[len("fail:"):].strip(), context_id=task.context_id, task_id=task.id))
        else:
            await updater.start_work(new_text_message(
                "working", context_id=task.context_id, task_id=task.id))
            await asyncio.sleep(0.2)
            await updater.add_artifact([new_data_part({"echo": text})])
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is not None:
            await TaskUpdater(event_queue, task.id, task.context_id).cancel()


def main():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    # Listening before it says so: a connection made right after waits in the backlog.
    sock.listen(128)
    port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    card = AgentCard(
        name="Translator Bot",
        description="Translates text into another language",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=f"{base}/", protocol_binding="JSONRPC",
                                             protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["application/json"],
        skills=[AgentSkill(id="translate", name="Translate", description="Translates text",
                           tags=["language"]),
                AgentSkill(id="echo", name="Echo", description="Says it back", tags=["echo"])],
    )
    handler = DefaultRequestHandler(agent_executor=Translator(),
                                    task_store=InMemoryTaskStore(), agent_card=card)
    reads = []

    async def grown(served):
        reads.append(1)
        if "--grows" in sys.argv and len(reads) > 1:
            served = AgentCard()
            served.CopyFrom(card)
            served.skills.append(AgentSkill(id="summarise", name="Summarise",
                                            description="Shortens text", tags=["language"]))
        return served

    async def executions(_request):
        return JSONResponse(EXECUTIONS)

    async def traces(_request):
        return JSONResponse({"headers": HEADERS, "metadata": METADATA})

    app = Starlette(routes=create_agent_card_routes(card, card_modifier=grown)
                    + create_jsonrpc_routes(handler, rpc_url="/")
                    + [Route("/executions", executions), Route("/traces", traces)],
                    middleware=[Middleware(SeenHeaders)])
    print(json.dumps({"port": port}), flush=True)
    config = uvicorn.Config(app, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
