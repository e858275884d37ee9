"""Runs Switchboard's A2A interface as the A2A test kit's system under test (by hand, not
in CI: the kit is a2aproject/a2a-tck, branch 1.0-dev, checked out outside this repository;
see docs/a2a.md, "The A2A test kit").

One member ("sut") of team "tck" is the SUT: a worker on Switchboard's WebSocket acts by
the TCK's messageId prefixes (the task id is "a2a-" + messageId). A proxy on PROXY_PORT
serves sut's card at the host root with its interface URLs pointing at the proxy, and
forwards every other request to Switchboard with the caller agent's bearer token (the
TCK sends none). Usage: harness.py SWITCHBOARD_BASE PROXY_PORT
"""
import asyncio, json, sys, uuid
import httpx, websockets, uvicorn
from starlette.applications import Starlette
from starlette.responses import Response, StreamingResponse, JSONResponse
from starlette.routing import Route

ADMIN = "tck-admin-token-0123456789"
BASE, PORT = sys.argv[1], int(sys.argv[2])
PROXY = f"http://127.0.0.1:{PORT}"


async def setup():
    async with httpx.AsyncClient(base_url=BASE) as h:
        r = await h.post("/v1/teams", headers={"Authorization": f"Bearer {ADMIN}"},
                         json={"name": "TCK", "team_id": "tck"})
        key = r.json()["team_key"]
        tokens = {}
        for a in ["caller", "sut"]:
            r = await h.post("/v1/teams/tck/agents", headers={"Authorization": f"Bearer {key}"},
                             json={"agent_id": a, "role": "TCK " + a, "capabilities": ["tck"]})
            tokens[a] = r.json()["token"]
        return tokens


class Worker:
    def __init__(self, token):
        self.url = BASE.replace("http://", "ws://") + "/v1/ws"
        self.token, self.replies = token, {}

    async def run(self):
        async with websockets.connect(self.url, additional_headers={"Authorization": f"Bearer {self.token}"}, max_size=None) as ws:
            self.ws = ws
            async for raw in ws:
                f = json.loads(raw)
                if "seq" in f:
                    await ws.send(json.dumps({"type": "ack", "seq": f["seq"]}))
                if f.get("type") == "reply":
                    fut = self.replies.pop(f.get("request_id"), None)
                    if fut: fut.set_result(f)
                elif f.get("type") == "TaskRequest":
                    asyncio.create_task(self.take(f))
                elif f.get("type") == "ClarificationResponse":
                    asyncio.create_task(self.answered(f))

    async def send(self, **frame):
        frame["request_id"] = str(uuid.uuid4())
        fut = asyncio.get_running_loop().create_future()
        self.replies[frame["request_id"]] = fut
        await self.ws.send(json.dumps(frame))
        ans = await fut
        if not ans.get("ok"):
            print("worker refused:", ans, file=sys.stderr)

    async def answered(self, f):
        # The TCK's follow-ups: "TCK history message N" keeps the task asking (its
        # prefix is tck-input-required), anything else completes it.
        if "history message" in json.dumps(f.get("answer")):
            await self.send(type="ClarificationRequest", task_id=f["task_id"], question="More input")
        else:
            await self.done(f["task_id"], "Hello from TCK")

    async def done(self, task_id, result):
        await self.send(type="TaskResponse", task_id=task_id, status="success", result_data=result)

    async def take(self, t):
        tid = t["task_id"]
        p = tid[len("a2a-"):]
        if p.startswith("tck-input-required"):
            await self.send(type="ClarificationRequest", task_id=tid, question="Need input")
        elif p.startswith("tck-reject-task"):
            await self.send(type="TaskResponse", task_id=tid, status="failed", result_data="rejected")
        elif p.startswith("tck-artifact-data"):
            await self.done(tid, {"key": "value", "count": 42})
        elif p.startswith("tck-artifact-text"):
            await self.done(tid, "Generated text content")
        elif p.startswith("test-resubscribe-message-id"):
            await self.send(type="TaskResponse", task_id=tid, status="in-progress", result_data="working")
            await asyncio.sleep(10)
            await self.done(tid, "done")
        elif p.startswith("tck-stream-artifact-text"):
            await self.send(type="TaskResponse", task_id=tid, status="in-progress", result_data=None)
            await self.done(tid, "Streamed text content")
        elif p.startswith("tck-stream-ordering-001"):
            await self.send(type="TaskResponse", task_id=tid, status="in-progress", result_data=None)
            await self.done(tid, "Ordered output")
        elif p.startswith("tck-stream-001"):
            await self.send(type="TaskResponse", task_id=tid, status="in-progress", result_data=None)
            await self.done(tid, "Stream hello from TCK")
        elif p.startswith("tck-stream-003"):
            await self.send(type="TaskResponse", task_id=tid, status="in-progress", result_data=None)
            await self.done(tid, "Stream task lifecycle")
        elif p.startswith("tck-stream"):
            await self.send(type="TaskResponse", task_id=tid, status="in-progress", result_data=None)
            await self.done(tid, "Streamed")
        else:
            await self.done(tid, "Hello from TCK")


def make_app(tokens):
    client = httpx.AsyncClient(base_url=BASE, timeout=None)

    async def card(request):
        r = await client.get("/a2a/tck/sut/.well-known/agent-card.json",
                             headers={"Authorization": f"Bearer {tokens['caller']}"})
        text = r.text.replace(BASE, PROXY)
        keep = {k: v for k, v in r.headers.items() if k.lower() in ("cache-control", "etag", "last-modified")}
        return Response(text, status_code=r.status_code, media_type="application/json", headers=keep)

    async def forward(request):
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length", "authorization")}
        headers["authorization"] = f"Bearer {tokens['caller']}"
        body = await request.body()
        req = client.build_request(request.method, request.url.path + (("?" + request.url.query) if request.url.query else ""),
                                   headers=headers, content=body)
        r = await client.send(req, stream=True)
        keep = {k: v for k, v in r.headers.items() if k.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding")}
        async def body_iter():
            async for chunk in r.aiter_raw():
                yield chunk
            await r.aclose()
        return StreamingResponse(body_iter(), status_code=r.status_code, headers=keep)

    return Starlette(routes=[
        Route("/.well-known/agent-card.json", card),
        Route("/{path:path}", forward, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
    ])


async def main():
    tokens = await setup()
    worker = Worker(tokens["sut"])
    asyncio.create_task(worker.run())
    config = uvicorn.Config(make_app(tokens), host="127.0.0.1", port=PORT, log_level="warning")
    print("ready", flush=True)
    await uvicorn.Server(config).serve()

asyncio.run(main())
