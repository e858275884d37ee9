"""A spent budget as each transport's stock client sees it.

Four agents, each allowed one message a day by the team's budget, each send twice to T:
R over REST (httpx), W over Switchboard's WebSocket (`websockets`), S over STOMP (stomp.py,
an agent token, a plain queue, with receipts), M over MCP (the official `mcp` SDK over
Streamable HTTP). The second send of each is refused, each in its transport's own form.

Usage: budgets.py BASE STOMP_PORT R_TOKEN W_TOKEN S_TOKEN M_TOKEN
Prints one JSON object: per agent, whether the first send went and the refusal as its
client got it. The Rust test (tests/it/budgets.rs) checks them and what was stored.
"""

import asyncio
import json
import sys

import httpx
import httpx2
import stomp
import websockets
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from stomp_listener import Listener

class StompErrors(Listener):
    """The shared listener, keeping ERROR frames' bodies (where the code is)."""

    def on_error(self, frame):
        self._add("errors", frame.body)


BODY = {"recipient_agent_ids": ["T"], "message_type": "information", "content": {"text": "hi"}}


async def rest(base, token):
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http:
        first = await http.post("/v1/messages", json={"sender_agent_id": "R", **BODY})
        second = await http.post("/v1/messages", json={"sender_agent_id": "R", **BODY})
        return {"first": first.status_code == 201, "status": second.status_code,
                "retry_after": second.headers.get("retry-after"), "body": second.json()}


async def websocket(base, token):
    url = base.replace("http://", "ws://") + "/v1/ws"
    replies = []
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
        for n in ("w1", "w2"):
            await ws.send(json.dumps({"type": "send_message", "request_id": n,
                                      "sender_agent_id": "W", **BODY}))
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                if frame.get("type") in ("reply", "ErrorMessage") and frame.get("request_id") == n:
                    replies.append(frame)
                    break
    return {"first": replies[0]["ok"], "refusal": replies[1]}


def over_stomp(port, token):
    conn = stomp.Connection12(host_and_ports=[("127.0.0.1", int(port))])
    listener = StompErrors("S")
    conn.set_listener("", listener)
    conn.connect(None, token, wait=True)
    conn.send(destination="/queue/T", body="first", receipt="s1")
    listener.wait(lambda l: "s1" in l.receipts or l.errors, "the first receipt")
    first = "s1" in listener.receipts
    conn.send(destination="/queue/T", body="second", receipt="s2")
    listener.wait(lambda l: l.errors or "s2" in l.receipts, "the second answer")
    return {"first": first, "receipt": "s2" in listener.receipts, "error": listener.errors[-1:]}


async def mcp(base, token):
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(base + "/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                first = await session.call_tool("send_message", BODY)
                second = await session.call_tool("send_message", BODY)
                return {"first": not first.is_error, "error": bool(second.is_error),
                        "text": second.content[0].text if second.content else None,
                        "data": second.structured_content}


async def run(base, stomp_port, r, w, s, m):
    out = {"R": await rest(base, r), "W": await websocket(base, w)}
    out["S"] = await asyncio.to_thread(over_stomp, stomp_port, s)
    out["M"] = await mcp(base, m)
    return out


def main():
    print(json.dumps(asyncio.run(run(*sys.argv[1:7]))))


if __name__ == "__main__":
    main()
