"""Wise Agents agents, as their STOMP transport puts them on the wire, against Switchboard.

Each agent is what Wise Agents' StompWiseAgentTransport does with stomp.py: two
connections (`stomp.Connection`, STOMP 1.1, heart-beats 60000,60000, the deployment's one
login/passcode, no host header), one subscribed with ack `auto` to
/queue/request/<agent>, the other to /queue/response/<agent>; requests are sent on the
first, responses on the second; bodies are `yaml.dump` of a `yaml.YAMLObject` tagged
`!wiseagents.WiseAgentMessage`, loaded on arrival with PyYAML's *unsafe* loader.

Usage: stomp_wise.py SCENARIO HOST PORT TEAM_ID TEAM_KEY
Prints one JSON object with what the agents received; exits non-zero when a check fails.
The Rust test (tests/it/stomp/) runs it against a real server and checks the server side.
"""

import json
import sys
import time

import stomp
import yaml

from stomp_listener import Listener


class WiseAgentMessage(yaml.YAMLObject):
    """The fields of Wise Agents' message class, dumped as their code dumps it."""

    yaml_tag = "!wiseagents.WiseAgentMessage"

    def __init__(self, message, sender=None, message_type=None, chat_id=None,
                 tool_id=None, context_name=None, route_response_to=None, old=False):
        self._message = message
        self._sender = sender
        self._message_type = message_type
        self._tool_id = tool_id
        self._context_name = context_name
        self._route_response_to = route_response_to
        if old:
            self._chat_id = chat_id


class Inbox(Listener):
    """What one connection received, each MESSAGE loaded as Wise Agents load it."""

    def on_message(self, frame):
        # Exactly what Wise Agents do with a body: PyYAML's unsafe loader.
        message = yaml.load(frame.body, Loader=yaml.Loader)
        self._add("messages", (message, frame.headers))


class WiseAgent:
    """One agent's two connections, as Wise Agents open them."""

    def __init__(self, name, host, port, login, passcode):
        self.name = name
        self.request = Inbox(f"{name}/request")
        self.response = Inbox(f"{name}/response")
        self.request_conn = self._open(host, port, login, passcode, self.request)
        self.response_conn = self._open(host, port, login, passcode, self.response)

    @staticmethod
    def _open(host, port, login, passcode, listener):
        conn = stomp.Connection(host_and_ports=[(host, port)], heartbeats=(60000, 60000))
        conn.set_listener("", listener)
        conn.connect(login, passcode, wait=True)
        return conn

    def start(self):
        self.request_conn.subscribe(destination=f"/queue/request/{self.name}", id=1, ack="auto")
        self.response_conn.subscribe(destination=f"/queue/response/{self.name}", id=2, ack="auto")

    def send_request(self, message, to):
        self.request_conn.send(body=yaml.dump(message), destination=f"/queue/request/{to}")

    def send_response(self, message, to):
        self.response_conn.send(body=yaml.dump(message), destination=f"/queue/response/{to}")

    def stop(self):
        for conn in (self.request_conn, self.response_conn):
            if conn.is_connected():
                conn.disconnect()


def fields(message):
    return {k: v for k, v in vars(message).items()}


def conversation(host, port, team, key):
    """A asks B, B answers A; an old-format body (with _chat_id) reads the same."""
    a = WiseAgent("WiseA", host, port, team, key)
    b = WiseAgent("WiseB", host, port, team, key)
    a.start()
    b.start()
    time.sleep(0.3)
    a.send_request(WiseAgentMessage("What is 2+2?", sender="WiseA", message_type="QUERY",
                                    context_name="ctx-1"), "WiseB")
    b.request.wait(lambda i: len(i.messages) >= 1, "the request")
    request, headers = b.request.messages[0]
    assert isinstance(request, WiseAgentMessage), type(request)
    assert request._message == "What is 2+2?", fields(request)
    assert request._sender == "WiseA", fields(request)
    assert request._message_type == "QUERY", fields(request)
    assert request._context_name == "ctx-1", fields(request)
    b.send_response(WiseAgentMessage("4", sender="WiseB", message_type="RESPONSE",
                                     context_name="ctx-1"), "WiseA")
    a.response.wait(lambda i: len(i.messages) >= 1, "the response")
    response, _ = a.response.messages[0]
    assert response._message == "4" and response._sender == "WiseB", fields(response)
    assert response._message_type == "RESPONSE", fields(response)
    # An older Wise Agents sends _chat_id too; it becomes the thread.
    a.send_request(WiseAgentMessage("old format", sender="WiseA", chat_id="chat-7", old=True),
                   "WiseB")
    b.request.wait(lambda i: len(i.messages) >= 2, "the old-format request")
    old, _ = b.request.messages[1]
    assert old._message == "old format" and old._chat_id == "chat-7", fields(old)
    # Nothing crossed queues.
    assert not a.request.messages and not b.response.messages
    a.stop()
    b.stop()
    return {
        "request": fields(request),
        "request_headers": dict(headers),
        "response": fields(response),
        "old": fields(old),
    }


def late(host, port, team, key):
    """A message to an agent with no subscriber waits for it: WiseLate is registered but
    not connected; it subscribes after the send and gets the message."""
    a = WiseAgent("WiseA", host, port, team, key)
    a.start()
    time.sleep(0.2)
    a.send_request(WiseAgentMessage("are you there?", sender="WiseA"), "WiseLate")
    time.sleep(0.5)
    late_agent = WiseAgent("WiseLate", host, port, team, key)
    late_agent.start()
    late_agent.request.wait(lambda i: len(i.messages) >= 1, "the waiting message")
    got, _ = late_agent.request.messages[0]
    assert got._message == "are you there?" and got._sender == "WiseA", fields(got)
    a.stop()
    late_agent.stop()
    return {"late": fields(got)}


MALICIOUS = '!!python/object/apply:os.system ["touch /tmp/switchboard-pwned"]\n'


def malicious(host, port, team, key):
    """A body that would run code in the receiver is refused with an ERROR to the sender,
    whose connection stays open (as on ActiveMQ Artemis); the receiver stays connected
    and never sees it."""
    evil = WiseAgent("WiseEvil", host, port, team, key)
    b = WiseAgent("WiseB", host, port, team, key)
    evil.start()
    b.start()
    time.sleep(0.2)
    evil.request_conn.send(body=MALICIOUS, destination="/queue/request/WiseB")
    evil.request.wait(lambda i: i.errors, "the ERROR frame")
    # The sender's connection goes on: the next SEND on it is taken, with its receipt.
    evil.request_conn.send(
        body=yaml.dump(WiseAgentMessage("harmless", sender="WiseEvil")),
        destination="/queue/request/WiseB", headers={"receipt": "after-error"})
    evil.request.wait(lambda i: "after-error" in i.receipts, "the receipt after the ERROR")
    assert not evil.request.disconnected and evil.request_conn.is_connected()
    b.request.wait(lambda i: len(i.messages) >= 1, "the harmless message")
    time.sleep(0.3)
    assert [m._message for m, _ in b.request.messages] == ["harmless"], b.request.messages
    assert b.request_conn.is_connected() and b.response_conn.is_connected()
    evil.stop()
    b.stop()
    return {"error": evil.request.errors[0], "receiver_got": [m._message for m, _ in b.request.messages]}


def receive(host, port, team, key):
    """WiseR subscribes and waits for one message sent by someone else (REST, WebSocket);
    prints it as loaded."""
    r = WiseAgent("WiseR", host, port, team, key)
    r.start()
    print(json.dumps({"ready": True}), flush=True)
    r.request.wait(lambda i: len(i.messages) >= 1, "a message", timeout=20)
    got, headers = r.request.messages[0]
    r.stop()
    return {"got": fields(got), "type": type(got).__name__, "headers": dict(headers)}


def routes(host, port, team, key):
    """WiseRt (also on a WebSocket the test holds) asks planner over STOMP, then takes
    what arrives: planner's reply (back by STOMP, where the request came from) on the
    response queue, and only the messages routed to STOMP or to every transport on the
    request queue (the test sends one routed to the WebSocket first, then one routed to
    STOMP, whose arrival ends the wait)."""
    r = WiseAgent("WiseRt", host, port, team, key)
    r.start()
    r.send_request(WiseAgentMessage("Which way back?", sender="WiseRt", message_type="QUERY"),
                   "planner")
    print(json.dumps({"ready": True}), flush=True)
    r.response.wait(lambda i: len(i.messages) >= 1, "the reply", timeout=20)
    r.request.wait(lambda i: len(i.messages) >= 1, "the message routed to STOMP", timeout=20)
    r.stop()
    return {"responses": [m._message for m, _ in r.response.messages],
            "requests": [m._message for m, _ in r.request.messages]}


def pass_through(host, port, team, key):
    """Wise Agents' PassThroughClientAgent: the client asks Pass, whose process_request
    forwards the request it got as the `_message` of its own —
    `WiseAgentMessage(message=request, sender=self.name, context_name=request.context_name)`
    — which PyYAML dumps as a nested !wiseagents.WiseAgentMessage. The worker loads the
    nested message; Pass stays connected and forwards a second request too."""
    client = WiseAgent("WiseClient", host, port, team, key)
    hop = WiseAgent("Pass", host, port, team, key)
    worker = WiseAgent("WiseWorker", host, port, team, key)
    for agent in (client, hop, worker):
        agent.start()
    time.sleep(0.3)
    for n, question in enumerate(["What is 2+2?", "And 3+3?"], start=1):
        client.send_request(WiseAgentMessage(question, sender="WiseClient", message_type="QUERY",
                                             context_name="default",
                                             route_response_to="WiseClient"), "Pass")
        hop.request.wait(lambda i: len(i.messages) >= n, "the client's request")
        request, _ = hop.request.messages[n - 1]
        # process_request, as Wise Agents wrote it.
        hop.send_request(WiseAgentMessage(request, sender="Pass", context_name=request._context_name),
                         "WiseWorker")
        worker.request.wait(lambda i: len(i.messages) >= n, "the forwarded request")
    assert not hop.request.errors and not hop.response.errors, (hop.request.errors, hop.response.errors)
    forwarded = [m for m, _ in worker.request.messages]
    for message in forwarded:
        assert isinstance(message, WiseAgentMessage), type(message)
        assert isinstance(message._message, WiseAgentMessage), fields(message)
    for agent in (client, hop, worker):
        agent.stop()
    first = forwarded[0]
    return {"outer": {k: v for k, v in fields(first).items() if k != "_message"},
            "inner": fields(first._message),
            "questions": [m._message._message for m in forwarded]}


SCENARIOS = {"conversation": conversation, "late": late, "malicious": malicious,
             "receive": receive, "routes": routes, "pass_through": pass_through}


def main():
    scenario, host, port, team, key = sys.argv[1:6]
    result = SCENARIOS[scenario](host, int(port), team, key)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
