"""Three agents, one per transport, answer each other in a circle until the loop guard
stops them.

R speaks REST (httpx), W Switchboard's WebSocket (Python `websockets`), S STOMP as Wise
Agents do (stomp.py, a team bridge connection with the deployment's login, the older
Wise Agents body whose `_chat_id` names the conversation). R sends to W, W to S, S to R,
all in one thread, each answering what it got (R and W name it in `in_reply_to`; S's
`_chat_id` continues the thread). Three circles are run, each started by another agent,
so that with the team's default cycle rule (12 sends going round) the 13th send —
refused — is made by the starter: once on each transport.

Usage: loop_guard.py BASE STOMP_PORT TEAM_ID TEAM_KEY R_TOKEN W_TOKEN
Prints one JSON object: per starter, the accepted sends and the refusal as its transport
gave it. The Rust test (tests/it/loops.rs) checks the server side.
"""

import asyncio
import json
import sys
import time
import uuid

import httpx
import stomp
import websockets
import yaml

from stomp_listener import Listener

ORDER = ["R", "W", "S"]


class WiseAgentMessage(yaml.YAMLObject):
    """Wise Agents' message class as the older generation dumps it (with `_chat_id`)."""

    yaml_tag = "!wiseagents.WiseAgentMessage"

    def __init__(self, message, sender, chat_id):
        self._message = message
        self._sender = sender
        self._message_type = None
        self._tool_id = None
        self._context_name = None
        self._route_response_to = None
        self._chat_id = chat_id


class StompInbox(Listener):
    """The shared listener, keeping what this test reads: MESSAGE bodies loaded as Wise
    Agents load them, and ERROR frames whole (headers and body)."""

    def __init__(self):
        super().__init__("S")

    def on_message(self, frame):
        self._add("messages", yaml.load(frame.body, Loader=yaml.Loader))

    def on_error(self, frame):
        self._add("errors", {"headers": dict(frame.headers), "body": frame.body})


class Circle:
    def __init__(self, base, stomp_port, team, key, r_token, w_token):
        self.base, self.team = base, team
        self.http = httpx.AsyncClient(base_url=base, timeout=10,
                                      headers={"Authorization": f"Bearer {r_token}"})
        self.w_token = w_token
        self.stomp_args = (stomp_port, team, key)
        self.w_frames = asyncio.Queue()
        self.w_replies = {}

    def open_stomp(self):
        port, team, key = self.stomp_args
        conn = stomp.Connection(host_and_ports=[("127.0.0.1", int(port))],
                                heartbeats=(60000, 60000))
        self.s_inbox = StompInbox()
        conn.set_listener("", self.s_inbox)
        conn.connect(team, key, wait=True)
        conn.subscribe(destination="/queue/request/S", id=1, ack="auto")
        self.s_conn = conn
        time.sleep(0.3)

    async def w_loop(self, ws):
        async for raw in ws:
            frame = json.loads(raw)
            if "seq" in frame:
                await ws.send(json.dumps({"type": "ack", "seq": frame["seq"]}))
            if frame.get("type") == "reply":
                self.w_replies.pop(frame["request_id"]).set_result(frame)
            elif frame.get("type") == "message":
                await self.w_frames.put(frame["message"])

    async def w_send(self, **frame):
        frame["request_id"] = str(uuid.uuid4())
        reply = asyncio.get_running_loop().create_future()
        self.w_replies[frame["request_id"]] = reply
        await self.ws.send(json.dumps(frame))
        return await asyncio.wait_for(reply, 10)

    async def r_receive(self, thread, seen):
        """R's newest message of the thread it has not answered yet (REST polling)."""
        for _ in range(200):
            res = await self.http.get("/v1/messages", params={"thread_id": thread})
            res.raise_for_status()
            fresh = [m for m in res.json()["messages"] if m["message_id"] not in seen
                     and m["sender_agent_id"] == "S"]
            if fresh:
                seen.add(fresh[0]["message_id"])
                return fresh[0]
            await asyncio.sleep(0.05)
        raise AssertionError("R got nothing")

    async def send(self, agent, thread, got, n):
        """`agent` answers `got` (None: it starts the circle). Returns (accepted, refusal)."""
        to = ORDER[(ORDER.index(agent) + 1) % 3]
        text = f"{thread} #{n} from {agent}"
        if agent == "R":
            body = {"sender_agent_id": "R", "recipient_agent_ids": [to],
                    "message_type": "request", "content": {"text": text},
                    "thread_id": thread}
            if got:
                body["in_reply_to"] = got["message_id"]
            res = await self.http.post("/v1/messages", json=body)
            if res.status_code == 201:
                return True, None
            return False, {"status": res.status_code, "body": res.json()}
        if agent == "W":
            frame = {"type": "send_message", "sender_agent_id": "W",
                     "recipient_agent_ids": [to], "message_type": "request",
                     "content": {"text": text}, "thread_id": thread}
            if got:
                frame["in_reply_to"] = got["message_id"]
            reply = await self.w_send(**frame)
            return (True, None) if reply["ok"] else (False, reply)
        receipt = f"{thread}-{n}"
        body = yaml.dump(WiseAgentMessage(text, "S", thread))
        self.s_conn.send(body=body, destination=f"/queue/request/{to}", receipt=receipt)
        self.s_inbox.wait(lambda i: receipt in i.receipts or i.errors, "a receipt or ERROR")
        if receipt in self.s_inbox.receipts:
            return True, None
        return False, self.s_inbox.errors[-1]

    async def receive(self, agent, thread, r_seen, s_count):
        if agent == "R":
            return await self.r_receive(thread, r_seen)
        if agent == "W":
            return await asyncio.wait_for(self.w_frames.get(), 10)
        self.s_inbox.wait(lambda i: len(i.messages) > s_count[0], "W's message")
        s_count[0] += 1
        return None

    async def circle(self, starter):
        thread = f"circle-{starter}"
        agent, got, accepted = starter, None, 0
        r_seen, s_count = set(), [len(self.s_inbox.messages)]
        for n in range(1, 40):
            ok, refusal = await self.send(agent, thread, got, n)
            if not ok:
                return {"accepted": accepted, "refused": agent, "refusal": refusal}
            accepted += 1
            agent = ORDER[(ORDER.index(agent) + 1) % 3]
            got = await self.receive(agent, thread, r_seen, s_count)
        raise AssertionError(f"{thread}: nothing stopped the circle")

    async def run(self):
        self.open_stomp()
        headers = {"Authorization": f"Bearer {self.w_token}"}
        url = self.base.replace("http://", "ws://") + "/v1/ws"
        async with websockets.connect(url, additional_headers=headers) as ws:
            self.ws = ws
            reader = asyncio.create_task(self.w_loop(ws))
            out = {}
            # S's refusal is an ERROR (its connection stays open); it goes last all the same.
            for starter in ["R", "W", "S"]:
                out[starter] = await self.circle(starter)
            # A new thread goes round again at once: the guard stops chains, not agents.
            ok, refusal = await self.send("R", "circle-fresh", None, 1)
            out["fresh_thread_accepted"] = ok
            reader.cancel()
        await self.http.aclose()
        return out


def main():
    base, stomp_port, team, key, r_token, w_token = sys.argv[1:7]
    out = asyncio.run(Circle(base, stomp_port, team, key, r_token, w_token).run())
    print(json.dumps(out))


if __name__ == "__main__":
    main()
