"""An A2A client calling a Switchboard agent: the official A2A SDK (`a2a-sdk`, pinned in
requirements.txt), unmodified, against a real server; the called agent is a worker over
Switchboard's own WebSocket (Python `websockets`).

Usage: a2a_agents.py SCENARIO BASE_URL TEAM_ID CLIENT_TOKEN WORKER_ID WORKER_TOKEN
Prints one JSON object with what the client saw; exits non-zero when a check fails.
The Rust test (tests/it/a2a.rs) runs it and checks the server side through REST.
"""

import asyncio
import contextlib
import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import websockets
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.client import ClientCallContext
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf import json_format


def state(name):
    return TaskState.Name(name)


def text_message(text, task_id=None, context_id=None):
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER,
                      parts=[Part(text=text)])
    if task_id:
        message.task_id = task_id
    if context_id:
        message.context_id = context_id
    return SendMessageRequest(message=message)


@contextlib.asynccontextmanager
async def client(base, team, agent, token, streaming=True, polling=False):
    """A client made as the SDK's users make one: from the agent's card URL."""
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    config = ClientConfig(httpx_client=http, streaming=streaming, polling=polling)
    factory = ClientFactory(config)
    sdk = await factory.create_from_url(f"{base}/a2a/{team}/{agent}")
    try:
        yield sdk
    finally:
        await sdk.close()
        await http.aclose()


class Worker:
    """The called agent: takes TaskRequests from its WebSocket and acts by frames. A task
    whose description starts with "ask:" gets a question first; "slow:" waits for a
    "go" before it works; everything else is done at once."""

    def __init__(self, base, token):
        self.url = base.replace("http://", "ws://") + "/v1/ws"
        self.token = token
        self.go = asyncio.Event()
        self.seen = []
        self.replies = {}

    async def run(self):
        headers = {"Authorization": f"Bearer {self.token}"}
        async with websockets.connect(self.url, additional_headers=headers) as ws:
            self.ws = ws
            async for raw in ws:
                frame = json.loads(raw)
                kind = frame.get("type")
                if "seq" in frame:
                    await ws.send(json.dumps({"type": "ack", "seq": frame["seq"]}))
                if kind == "reply":
                    self.replies.pop(frame["request_id"]).set_result(frame)
                elif kind == "TaskRequest":
                    self.seen.append(frame["task_id"])
                    asyncio.create_task(self.take(frame))
                elif kind == "ClarificationResponse":
                    asyncio.create_task(self.finish(frame["task_id"], frame["answer"]))
                elif kind == "TaskOffer":
                    self.seen.append(frame["task_id"])
                    asyncio.create_task(self.claim())

    async def send(self, **frame):
        """Sends an operation frame and waits for its reply (frames are handled
        concurrently: a report sent before another is not done before it otherwise)."""
        frame["request_id"] = str(uuid.uuid4())
        reply = asyncio.get_running_loop().create_future()
        self.replies[frame["request_id"]] = reply
        await self.ws.send(json.dumps(frame))
        answer = await reply
        assert answer["ok"], answer
        return answer["result"]

    async def claim(self):
        """Claims the next task offered to the worker's role, and works it."""
        claimed = await self.send(type="claim_task")
        if claimed.get("task"):
            await self.take(claimed["task"])

    async def take(self, task):
        # A worker takes a moment: the client has read what its send answered before the
        # worker acts on it (otherwise the first event may already show the next state).
        await asyncio.sleep(0.1)
        description = task["description"]
        if description.startswith("ask:"):
            await self.send(type="ClarificationRequest", task_id=task["task_id"],
                            question="Which region?")
        elif description.startswith("slow:"):
            await self.go.wait()
            await self.finish(task["task_id"], "slow")
        elif description.startswith("hold:"):
            pass
        else:
            await self.finish(task["task_id"], description)

    async def finish(self, task_id, said):
        await asyncio.sleep(0.1)
        await self.send(type="TaskResponse", task_id=task_id, status="in-progress",
                        result_data={"percent": 50})
        await self.send(type="TaskResponse", task_id=task_id, status="success",
                        result_data={"summary": f"done: {said}"})


def seen(events):
    """What a stream said, in order: task snapshots, status states, artifacts."""
    out = []
    for event in events:
        which = event.WhichOneof("payload")
        if which == "task":
            out.append(["task", state(event.task.status.state)])
        elif which == "status_update":
            update = event.status_update
            text = update.status.message.parts[0].text if update.status.message.parts else None
            out.append(["status", state(update.status.state), text])
        elif which == "artifact_update":
            artifact = json_format.MessageToDict(event.artifact_update.artifact)
            out.append(["artifact", artifact["parts"][0]])
    return out


async def conversation(base, team, token, worker_id, worker_token):
    worker = Worker(base, worker_token)
    running = asyncio.create_task(worker.run())
    await asyncio.sleep(0.3)
    out = {}
    async with client(base, team, worker_id, token) as a2a:
        card = await a2a.get_extended_agent_card(GetExtendedAgentCardRequest())
        out["card"] = {"name": card.name, "streaming": card.capabilities.streaming,
                       "skills": [s.id for s in card.skills],
                       "url": card.supported_interfaces[0].url}

        # Streaming: the worker asks, the stream stops at INPUT_REQUIRED; the answer on the
        # same task opens a second stream that ends COMPLETED with the result artifact.
        first = [e async for e in a2a.send_message(text_message("ask: summarise Q3"))]
        task_id = first[0].task.id
        context_id = first[0].task.context_id
        out["asked"] = seen(first)
        second = [e async for e in a2a.send_message(
            text_message("EMEA", task_id=task_id, context_id=context_id))]
        out["answered"] = seen(second)
        task = await a2a.get_task(GetTaskRequest(id=task_id))
        out["task"] = json_format.MessageToDict(task)

        # A continuation with somebody else's context is refused.
        try:
            [e async for e in a2a.send_message(
                text_message("more", task_id=task_id, context_id="other"))]
            out["wrong_context"] = "accepted"
        except InvalidParamsError as err:
            out["wrong_context"] = str(err)

        # Unknown tasks and a finished task's subscription.
        try:
            await a2a.get_task(GetTaskRequest(id="no-such-task"))
        except TaskNotFoundError:
            out["unknown_task"] = "TaskNotFoundError"
        try:
            [e async for e in a2a.subscribe(SubscribeToTaskRequest(id=task_id))]
        except UnsupportedOperationError:
            out["finished_subscribe"] = "UnsupportedOperationError"
        listed = await a2a.list_tasks(ListTasksRequest(context_id=context_id))
        out["listed"] = [t.id for t in listed.tasks]

    # Blocking (not streaming): the answer is the finished task.
    async with client(base, team, worker_id, token, streaming=False) as a2a:
        [answer] = [e async for e in a2a.send_message(text_message("count the logs"))]
        out["blocking"] = {"state": state(answer.task.status.state),
                           "artifact": json_format.MessageToDict(answer.task.artifacts[0])}

    # returnImmediately: the task as submitted; cancel it; cancel again is refused.
    async with client(base, team, worker_id, token, streaming=False, polling=True) as a2a:
        [answer] = [e async for e in a2a.send_message(text_message("hold: wait"))]
        out["immediate"] = state(answer.task.status.state)
        canceled = await a2a.cancel_task(CancelTaskRequest(id=answer.task.id))
        out["canceled"] = state(canceled.status.state)
        try:
            await a2a.cancel_task(CancelTaskRequest(id=answer.task.id))
        except TaskNotCancelableError:
            out["cancel_again"] = "TaskNotCancelableError"

    running.cancel()
    return out


async def resume(base, team, token, worker_id, worker_token):
    """A subscriber drops its stream after the first event; the task goes on; it
    subscribes again from the last event id it saw and misses nothing."""
    worker = Worker(base, worker_token)
    running = asyncio.create_task(worker.run())
    await asyncio.sleep(0.3)
    out = {}
    async with client(base, team, worker_id, token, streaming=False, polling=True) as a2a:
        [answer] = [e async for e in a2a.send_message(text_message("slow: report"))]
        task_id = answer.task.id
    async with client(base, team, worker_id, token) as a2a:
        stream = a2a.subscribe(SubscribeToTaskRequest(id=task_id))
        first = await stream.__anext__()
        await stream.aclose()
        out["first"] = seen([first])
        # The task's history says where the stream was: the snapshot's newest entry.
        last_seen = 1
        worker.go.set()
        for _ in range(100):
            task = await a2a.get_task(GetTaskRequest(id=task_id))
            if task.status.state == TaskState.TASK_STATE_COMPLETED:
                break
            await asyncio.sleep(0.05)
        context = ClientCallContext(service_parameters={"Last-Event-ID": str(last_seen)})
        rest = [e async for e in a2a.subscribe(SubscribeToTaskRequest(id=task_id),
                                               context=context)]
        out["resumed"] = seen(rest)
    running.cancel()
    return out


async def idempotent(base, team, token, worker_id, worker_token):
    """The same message sent twice (a client retrying) makes one task."""
    out = {}
    async with client(base, team, worker_id, token, streaming=False, polling=True) as a2a:
        request = text_message("hold: once")
        [one] = [e async for e in a2a.send_message(request)]
        [two] = [e async for e in a2a.send_message(request)]
        out["ids"] = [one.task.id, two.task.id]
    return out


async def loop(base, team, token, worker_id, worker_token):
    """Each send references the task the previous one made (`referenceTaskIds`): with the
    team's `max_hops` at 2 the third is refused, as the SDK raises a -32004."""
    out = {"ids": []}
    async with client(base, team, worker_id, token, streaming=False, polling=True) as a2a:
        previous = None
        for n in range(3):
            request = text_message(f"hold: step {n}")
            if previous:
                request.message.reference_task_ids.append(previous)
            try:
                [answer] = [e async for e in a2a.send_message(request)]
            except UnsupportedOperationError as err:
                out["refused"] = {"type": type(err).__name__, "message": str(err),
                                  "data": json.loads(json.dumps(err.data, default=str))}
                break
            previous = answer.task.id
            out["ids"].append(previous)
    return out


async def budget(base, team, token, worker_id, worker_token):
    """Two sends with the team allowing one task a day: the first names its trace in the
    message's metadata (the task comes back in it); the second is refused, and the SDK
    raises whatever A2A error it maps the answer to — kept with its ErrorInfo data."""
    out = {}
    async with client(base, team, worker_id, token, streaming=False, polling=True) as a2a:
        request = text_message("hold: budgeted")
        request.message.metadata.update(
            {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
        [answer] = [e async for e in a2a.send_message(request)]
        out["task"] = {"id": answer.task.id,
                       "traceparent": answer.task.metadata["traceparent"]}
        try:
            [e async for e in a2a.send_message(text_message("hold: one too many"))]
        except Exception as err:  # the refusal, in whatever class the SDK gives it
            out["refused"] = {"type": type(err).__name__, "message": str(err),
                              "data": json.loads(json.dumps(getattr(err, "data", None),
                                                            default=str))}
    return out


async def legacy(base, team, token, worker_id, worker_token):
    """The SDK's 0.3 compat client (what it uses for agents that advertise 0.3): the
    card's 0.3 interface only, then the same conversation in 0.3's methods and shapes."""
    worker = Worker(base, worker_token)
    running = asyncio.create_task(worker.run())
    await asyncio.sleep(0.3)
    out = {}
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    card = await A2ACardResolver(http, f"{base}/a2a/{team}/{worker_id}").get_agent_card()
    out["versions"] = [i.protocol_version for i in card.supported_interfaces]
    legacy_only = [i for i in card.supported_interfaces if i.protocol_version == "0.3"]
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(legacy_only)
    a2a = ClientFactory(ClientConfig(httpx_client=http)).create(card)
    out["transport"] = type(a2a._transport).__name__
    first = [e async for e in a2a.send_message(text_message("ask: legacy report"))]
    task_id = first[0].task.id
    out["asked"] = seen(first)
    second = [e async for e in a2a.send_message(
        text_message("APAC", task_id=task_id, context_id=first[0].task.context_id))]
    out["answered"] = seen(second)
    task = await a2a.get_task(GetTaskRequest(id=task_id))
    out["state"] = state(task.status.state)
    out["history"] = [m.parts[0].text for m in task.history]
    try:
        await a2a.get_task(GetTaskRequest(id="no-such-task"))
    except TaskNotFoundError:
        out["unknown_task"] = "TaskNotFoundError"
    await http.aclose()
    running.cancel()
    return out


class PushReceiver:
    """A push notification receiver as an A2A client runs one: it accepts a POST only
    with the token it gave in the config (401 otherwise) and keeps what it accepted."""

    def __init__(self, token, credentials):
        self.token = token
        self.authorization = f"Bearer {credentials}"
        self.accepted = []
        self.refused = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if (self.headers.get("X-A2A-Notification-Token") != receiver.token
                        or self.headers.get("Authorization") != receiver.authorization):
                    receiver.refused += 1
                    self.send_response(401)
                else:
                    receiver.accepted.append(json.loads(body))
                    self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    async def until(self, done, seconds=10):
        for _ in range(int(seconds / 0.05)):
            if done(self.accepted):
                return
            await asyncio.sleep(0.05)


def pushed(notes):
    """What a receiver was told: status states and artifacts, in order."""
    out = []
    for note in notes:
        if "statusUpdate" in note:
            out.append(["status", note["statusUpdate"]["status"]["state"]])
        elif "artifactUpdate" in note:
            out.append(["artifact", note["artifactUpdate"]["artifact"]["parts"][0]])
    return out


async def push(base, team, token, worker_id, worker_token):
    """Push configs with the stock client: create, get, list, delete; the receiver checks
    the token and credentials of every notification it gets."""
    worker = Worker(base, worker_token)
    running = asyncio.create_task(worker.run())
    await asyncio.sleep(0.3)
    receiver = PushReceiver("tok-42", "receiver-secret")
    out = {}
    async with client(base, team, worker_id, token, streaming=False, polling=True) as a2a:
        [answer] = [e async for e in a2a.send_message(text_message("slow: pushed"))]
        task_id = answer.task.id
        config = TaskPushNotificationConfig(
            task_id=task_id, id="hook-1", url=receiver.url, token="tok-42",
            authentication=AuthenticationInfo(scheme="Bearer",
                                              credentials="receiver-secret"))
        made = await a2a.create_task_push_notification_config(config)
        out["created"] = json_format.MessageToDict(made)
        spare = TaskPushNotificationConfig(task_id=task_id, id="hook-2",
                                           url=receiver.url + "/spare")
        await a2a.create_task_push_notification_config(spare)
        got = await a2a.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task_id, id="hook-1"))
        out["got"] = json_format.MessageToDict(got)
        listed = await a2a.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id))
        out["listed"] = [c.id for c in listed.configs]
        await a2a.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="hook-2"))
        listed = await a2a.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id))
        out["after_delete"] = [c.id for c in listed.configs]
        try:
            await a2a.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task_id, id="hook-2"))
        except TaskNotFoundError:
            out["deleted_get"] = "TaskNotFoundError"
        worker.go.set()
        await receiver.until(lambda notes: any(
            n.get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED"
            for n in notes))
        out["pushed"] = pushed(receiver.accepted)
        out["refused"] = receiver.refused
    receiver.server.shutdown()
    running.cancel()
    return out


async def cards(base, team, token, worker_id, worker_token):
    """The worker's card as both generations of the SDK read it: the 1.0 resolver's parse
    (`parse_agent_card`) and the 0.3 card model (`a2a.compat.v0_3.types.AgentCard`, what
    a 0.3 client validates a card with), from the URL a client is given."""
    from a2a.client.card_resolver import parse_agent_card
    from a2a.compat.v0_3.types import AgentCard as V03Card

    url = f"{base}/a2a/{team}/{worker_id}/.well-known/agent-card.json"
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        card = (await http.get(url)).raise_for_status().json()
    v10 = parse_agent_card(json.loads(json.dumps(card)))
    v03 = V03Card.model_validate(card)
    return {
        "v10_interfaces": [[i.url, i.protocol_binding, i.protocol_version]
                           for i in v10.supported_interfaces],
        "v03_url": v03.url,
        "v03_version": v03.protocol_version,
        "v03_transport": v03.preferred_transport,
        "v03_security": [list(r.keys()) for r in (v03.security or [])],
        "v03_scheme": v03.security_schemes["bearer"].root.model_dump(exclude_none=True),
    }


async def role(base, team, token, worker_id, worker_token):
    """A role as an A2A member: the SDK resolves the role's card from the URL it is given
    (`/a2a/{team}/role:coder`) and streams a message there; the worker, an agent of the
    role on the WebSocket, is offered the task, claims it and finishes it."""
    worker = Worker(base, worker_token)
    running = asyncio.create_task(worker.run())
    await asyncio.sleep(0.3)
    out = {}
    async with client(base, team, "role:coder", token) as a2a:
        card = await a2a.get_extended_agent_card(GetExtendedAgentCardRequest())
        out["card"] = {"name": card.name, "skills": [s.id for s in card.skills],
                       "url": card.supported_interfaces[0].url}
        events = [e async for e in a2a.send_message(text_message("tidy the changelog"))]
        out["stream"] = seen(events)
        task_id = events[0].task.id
        listed = await a2a.list_tasks(ListTasksRequest())
        out["listed"] = [t.id for t in listed.tasks]
        out["task_id"] = task_id
    out["offered"] = worker.seen
    running.cancel()
    return out


def main():
    scenario, base, team, token, worker_id, worker_token = sys.argv[1:7]
    run = {"conversation": conversation, "resume": resume, "idempotent": idempotent,
           "legacy": legacy, "push": push, "cards": cards, "loop": loop,
           "budget": budget, "role": role}[scenario]
    print(json.dumps(asyncio.run(run(base, team, token, worker_id, worker_token))))


if __name__ == "__main__":
    main()
