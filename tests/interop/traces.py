"""One piece of work across three agents on three transports is one W3C trace.

A speaks REST (httpx), W Switchboard's WebSocket (Python `websockets`), S STOMP (stomp.py,
an agent token). A sends W a request with a `traceparent` header of its own trace (and a
`tracestate`); W gets the message pushed with a `traceparent` naming that message's span
and sends S a message with that value in the frame's `traceparent` field, as an
instrumented agent continues a trace; S gets a STOMP MESSAGE whose `traceparent` header
names W's message and SENDs A an answer with that header; A reads its inbox. A last send
with a malformed `traceparent` shows the server starting a new trace instead.

Usage: traces.py BASE STOMP_PORT A_TOKEN W_TOKEN S_TOKEN
Prints one JSON object with every message id and every `traceparent` and `tracestate`
seen on the way; the Rust test (tests/it/traces.rs) checks them and the stored trace.
"""

import asyncio
import json
import sys

import httpx
import stomp
import websockets

from stomp_listener import Listener

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
A_SPAN = "00f067aa0ba902b7"
STATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"


async def next_message(ws):
    while True:
        frame = json.loads(await ws.recv())
        if frame.get("type") == "message":
            return frame["message"]


async def reply_to(ws, request_id):
    while True:
        frame = json.loads(await ws.recv())
        if frame.get("type") == "reply" and frame.get("request_id") == request_id:
            return frame


async def run(base, stomp_port, a_token, w_token, s_token):
    out = {}
    http = httpx.AsyncClient(base_url=base, timeout=10)
    s_conn = stomp.Connection12(host_and_ports=[("127.0.0.1", int(stomp_port))])
    s_in = Listener("S")
    s_conn.set_listener("", s_in)
    s_conn.connect(None, s_token, wait=True)
    s_conn.subscribe("/queue/request/S", id="s", ack="auto")
    url = base.replace("http://", "ws://") + "/v1/ws"
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {w_token}"}) as ws:
        # A → W over REST, in A's own trace.
        sent = await http.post(
            "/v1/messages",
            headers={
                "Authorization": f"Bearer {a_token}",
                "traceparent": f"00-{TRACE}-{A_SPAN}-01",
                "tracestate": STATE,
            },
            json={"sender_agent_id": "A", "recipient_agent_ids": ["W"],
                  "message_type": "request", "content": {"text": "summarise the report"}},
        )
        assert sent.status_code == 201, sent.text
        out["m1"] = sent.json()["message_id"]
        pushed = await next_message(ws)
        out["w_got"] = {k: pushed.get(k) for k in ("message_id", "traceparent", "tracestate")}
        # W → S over the WebSocket, continuing the trace it was handed.
        await ws.send(json.dumps({
            "type": "send_message", "request_id": "w1",
            "traceparent": pushed["traceparent"], "tracestate": pushed.get("tracestate"),
            "sender_agent_id": "W", "recipient_agent_ids": ["S"],
            "message_type": "request", "content": {"text": "find the figures"},
        }))
        reply = await reply_to(ws, "w1")
        assert reply["ok"], reply
        out["m2"] = reply["result"]["message_id"]
    # S gets it over STOMP, and answers A with the header it got.
    s_in.wait(lambda l: l.messages, "W's message")
    frame = s_in.messages[0]
    out["s_got"] = {k: frame.headers.get(k) for k in
                    ("switchboard-message-id", "traceparent", "tracestate")}
    s_conn.send(destination="/queue/A", body="the figures are in",
                headers={"traceparent": frame.headers["traceparent"],
                         "tracestate": frame.headers.get("tracestate", "")},
                receipt="r1")
    s_in.wait(lambda l: "r1" in l.receipts, "the receipt of S's answer")
    # A reads the answer: still the same trace.
    inbox = await http.get("/v1/messages?limit=10", headers={"Authorization": f"Bearer {a_token}"})
    answer = next(m for m in inbox.json()["messages"] if m["sender_agent_id"] == "S")
    out["m3"] = answer["message_id"]
    out["a_got"] = {k: answer.get(k) for k in ("traceparent", "tracestate")}
    # A malformed traceparent (upper-case hex) starts a new trace; its tracestate is dropped.
    bad = await http.post(
        "/v1/messages",
        headers={"Authorization": f"Bearer {a_token}",
                 "traceparent": f"00-{TRACE.upper()}-{A_SPAN}-01", "tracestate": STATE},
        json={"sender_agent_id": "A", "recipient_agent_ids": ["W"],
              "message_type": "information", "content": {"text": "new"}},
    )
    assert bad.status_code == 201, bad.text
    out["m4"] = bad.json()["message_id"]
    s_conn.disconnect()
    await http.aclose()
    return out


def main():
    base, stomp_port, a_token, w_token, s_token = sys.argv[1:6]
    print(json.dumps(asyncio.run(run(base, stomp_port, a_token, w_token, s_token))))


if __name__ == "__main__":
    main()
