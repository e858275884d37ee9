"""Wise Agents processes that must never go deaf or mute, driven as their transport
drives stomp.py (see stomp_wise.py for the frames), against Switchboard.

What makes a Wise Agents process deaf is its listener thread dying: stomp.py calls the
listener on its receiver thread, and an exception there ends the thread (stomp.py
catches only a closed connection). Wise Agents' request listener hands every body to
`WiseAgent.handle_request`, which starts with

    context = WiseAgentRegistry.get_context(request.context_name)
    collaboration_type = context.collaboration_type

so a body whose `_context_name` is missing, or names a context the deployment never
created, raises (AttributeError; with Redis contexts a `None` name is a DataError) and
the process hears nothing more. `WiseListener` below does exactly that check, raising as
Wise Agents does; its `crashes` count says whether it would have died.

Usage: stomp_never_deaf.py SCENARIO HOST STOMP_PORT HTTP_PORT TEAM_ID TEAM_KEY OPS_TOKEN
Prints one JSON object with what happened; exits non-zero when a check fails.
"""

import json
import socket
import sys
import time
import urllib.error
import urllib.request

import stomp
import yaml

from stomp_listener import Listener
from stomp_wise import WiseAgentMessage, fields

# The contexts the deployment created at start (WiseAgentRegistry.create_context, in
# Redis for a deployment of several processes): the only ones handle_request finds.
CONTEXTS = {"CLI.ctx"}


class WiseListener(Listener):
    """WiseAgentRequestQueueListener / WiseAgentResponseQueueListener, with
    handle_request's first two lines: a body it cannot take kills the receiver thread.
    Messages are kept as Wise Agents load them; `crashes` counts the would-be deaths."""

    def __init__(self, name):
        super().__init__(name)
        self.crashes = 0

    def on_message(self, frame):
        message = yaml.load(frame.body, Loader=yaml.Loader)
        self._add("messages", message)
        if message._context_name not in CONTEXTS:
            with self.cond:
                self.crashes += 1
                self.cond.notify_all()
            raise AttributeError("'NoneType' object has no attribute 'collaboration_type'")


class Agent:
    """StompWiseAgentTransport, call for call: start() opens and subscribes two
    connections; send_request reconnects a dropped connection (never subscribing
    again) and sends on the request connection; send_response sends on the response
    connection; stop() unsubscribes by the first subscriptions' ids, then disconnects."""

    def __init__(self, name, host, port, login, passcode):
        self.name, self.host, self.port = name, host, port
        self.login, self.passcode = login, passcode
        self.request = WiseListener(f"{name}/request")
        self.response = WiseListener(f"{name}/response")
        self.request_conn = None
        self.response_conn = None

    def _conn(self, listener):
        conn = stomp.Connection(host_and_ports=[(self.host, self.port)], heartbeats=(60000, 60000))
        conn.set_listener("", listener)
        conn.connect(self.login, self.passcode, wait=True)
        return conn

    def start(self):
        self.request_conn = self._conn(self.request)
        self.request_conn.subscribe(destination=f"/queue/request/{self.name}", id=id(self), ack="auto")
        self.response_conn = self._conn(self.response)
        self.response_conn.subscribe(destination=f"/queue/response/{self.name}", id=id(self) + 1,
                                     ack="auto")

    def send_request(self, message, to):
        if not self.request_conn.is_connected():
            self.request_conn.connect(self.login, self.passcode, wait=True)
        if not self.response_conn.is_connected():
            self.response_conn.connect(self.login, self.passcode, wait=True)
        self.request_conn.send(body=yaml.dump(message), destination=f"/queue/request/{to}")

    def send_response(self, message, to):
        self.response_conn.send(body=yaml.dump(message), destination=f"/queue/response/{to}")

    def stop(self):
        if self.request_conn.is_connected():
            self.request_conn.unsubscribe(destination=f"/queue/request/{self.name}", id=id(self))
            self.request_conn.disconnect()
        if self.response_conn.is_connected():
            self.response_conn.unsubscribe(destination=f"/queue/response/{self.name}",
                                           id=id(self) + 1)
            self.response_conn.disconnect()

    def crashes(self):
        return self.request.crashes + self.response.crashes


def rest(http, token, method, path, body=None):
    """One call to the REST API with the standard library."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{http}{path}", data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}",
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return json.loads(res.read() or b"null")
    except urllib.error.HTTPError as err:
        raise AssertionError(f"{method} {path}: {err.code} {err.read().decode()}") from err


def ask(asker, answerer, text):
    """The asker's request, the answerer's reply, as Wise Agents' handle_response sends
    it back to request.sender; returns the reply as the asker loaded it."""
    seen = len(asker.response.messages)
    asker.send_request(WiseAgentMessage(text, sender=asker.name, context_name="CLI.ctx"),
                       answerer.name)
    answerer.request.wait(lambda l: any(m._message == text for m in l.messages), f"'{text}'")
    answerer.send_response(WiseAgentMessage(f"re: {text}", sender=answerer.name,
                                            context_name="CLI.ctx"), asker.name)
    asker.response.wait(lambda l: len(l.messages) > seen, f"the reply to '{text}'")
    return asker.response.messages[-1]


def broadcast(host, port, http, team, key, ops):
    """A live Wise team, and everything a REST agent can send it without a context: a
    broadcast, a message, a publish to <all>. No Wise listener dies; the agents still
    converse; once the team names its default context, a broadcast reaches them in it."""
    a = Agent("WiseA", host, port, team, key)
    b = Agent("WiseB", host, port, team, key)
    a.start()
    b.start()
    time.sleep(0.3)
    rest(http, ops, "POST", "/v1/broadcasts", {
        "sender_agent_id": "ops", "update_type": "issue", "urgency": "critical",
        "content": {"summary": "Deploy freeze", "details": "until 18:00"}})
    rest(http, ops, "POST", "/v1/messages", {
        "sender_agent_id": "ops", "recipient_agent_ids": ["WiseA", "WiseB"],
        "message_type": "request", "content": {"text": "no context here"}})
    rest(http, ops, "POST", "/v1/publish", {
        "cause_by": "news", "send_to": ["<all>"], "content": {"text": "to everyone"}})
    rest(http, ops, "POST", "/v1/messages", {
        "sender_agent_id": "ops", "recipient_agent_ids": ["WiseA"],
        "message_type": "request", "content": {"text": "in the CLI context"},
        "context_reference": "CLI.ctx"})
    a.request.wait(lambda l: l.messages, "the message that names a context")
    reply = ask(a, b, "still there?")
    rest(http, key, "PATCH", f"/v1/teams/{team}", {"stomp_default_context": "CLI.ctx"})
    rest(http, ops, "POST", "/v1/broadcasts", {
        "sender_agent_id": "ops", "update_type": "progress", "urgency": "info",
        "content": {"summary": "Freeze lifted", "details": "go ahead"}})
    for agent in (a, b):
        agent.request.wait(lambda l: len(l.messages) >= 2, "the broadcast in the default context")
    again = ask(b, a, "and now?")
    out = {
        "crashes": a.crashes() + b.crashes(),
        "a_requests": [(m._message, m._context_name) for m in a.request.messages],
        "b_requests": [(m._message, m._context_name) for m in b.request.messages],
        "reply": reply._message,
        "again": again._message,
        "errors": a.request.errors + a.response.errors + b.request.errors + b.response.errors,
    }
    a.stop()
    b.stop()
    return out


def dropped(host, port, http, team, key, ops):
    """WiseA's request connection drops (the socket cut, no DISCONNECT). Wise Agents'
    send_request reconnects it without subscribing again and sends on it: the send is
    taken, the answer comes back on A's response queue, and stop() unsubscribing by the
    old id on the new connection is no error."""
    a = Agent("WiseA", host, port, team, key)
    b = Agent("WiseB", host, port, team, key)
    a.start()
    b.start()
    time.sleep(0.3)
    first = ask(a, b, "before the drop")
    a.request_conn.transport.socket.shutdown(socket.SHUT_RDWR)
    a.request.wait(lambda l: l.disconnected, "the dropped connection")
    after = ask(a, b, "after the drop")
    again = ask(a, b, "and once more")
    a.stop()
    time.sleep(0.3)
    out = {
        "crashes": a.crashes() + b.crashes(),
        "answers": [first._message, after._message, again._message],
        "errors": a.request.errors + a.response.errors + b.request.errors + b.response.errors,
        "a_request_connected_at_stop": a.request_conn.is_connected(),
    }
    b.stop()
    return out


def any_order(host, port, http, team, key, ops):
    """The asker starts, and sends, before the agent it asks exists anywhere: the
    request waits for it as on a broker's queue, and is answered once it starts. The
    asker's connection stays open throughout."""
    a = Agent("WiseFirst", host, port, team, key)
    a.start()
    time.sleep(0.2)
    a.send_request(WiseAgentMessage("who starts first?", sender="WiseFirst",
                                    context_name="CLI.ctx"), "WiseLater")
    time.sleep(0.5)
    b = Agent("WiseLater", host, port, team, key)
    b.start()
    b.request.wait(lambda l: l.messages, "the request that waited")
    got = b.request.messages[0]
    b.send_response(WiseAgentMessage("me, later", sender="WiseLater", context_name="CLI.ctx"),
                    "WiseFirst")
    a.response.wait(lambda l: l.messages, "the answer")
    # The bound on agents waiting for a first subscription: 64 of the team's may wait;
    # the 65th name is refused, and the sender's connection stays open.
    spammer = Agent("Spammer", host, port, team, key)
    spammer.start()
    for n in range(65):
        body = yaml.dump(WiseAgentMessage(f"hello {n}", sender="Spammer", context_name="CLI.ctx"))
        spammer.request_conn.send(body=body, destination=f"/queue/request/Ghost{n}",
                                  headers={"receipt": f"g{n}"})
    spammer.request.wait(lambda l: len(l.receipts) + len(l.errors) >= 65, "every answer")
    out = {
        "crashes": a.crashes() + b.crashes(),
        "waited": fields(got),
        "answer": a.response.messages[0]._message,
        "errors": a.request.errors + a.response.errors + b.request.errors + b.response.errors
        + spammer.request.errors,
        "a_connected": a.request_conn.is_connected() and a.response_conn.is_connected(),
        "ghosts_taken": len(spammer.request.receipts),
        "spammer_connected": spammer.request_conn.is_connected(),
    }
    for agent in (a, b, spammer):
        agent.stop()
    return out


def answer_rest(host, port, http, team, key, ops):
    """A REST agent asks a Wise agent in a thread; the Wise agent answers as
    handle_response does (a new message to request.sender's response queue, no
    _chat_id). Prints the ids; the test reads the link through REST."""
    w = Agent("WiseW", host, port, team, key)
    w.start()
    time.sleep(0.3)
    sent = rest(http, ops, "POST", "/v1/messages", {
        "sender_agent_id": "ops", "recipient_agent_ids": ["WiseW"],
        "message_type": "request", "requires_response": True, "thread_id": "standup",
        "content": {"text": "status?"}, "context_reference": "CLI.ctx"})
    w.request.wait(lambda l: l.messages, "the REST request")
    request = w.request.messages[0]
    w.send_response(WiseAgentMessage("all green", sender="WiseW",
                                     context_name=request._context_name), request._sender)
    time.sleep(0.5)
    out = {"crashes": w.crashes(), "original": sent["message_id"], "errors": w.request.errors}
    w.stop()
    return out


def plain_headers(host, port, http, team, key, ops):
    """A plain queue keeps the sender's own headers, as a broker does, after the ones
    the server vouches for. Plain queues are an agent's own: here KEY is the token of
    the agent `reader`, and ops sends to its queue."""
    sender = stomp.Connection12(host_and_ports=[(host, port)])
    got = WiseListener("plain")
    receiver = stomp.Connection12(host_and_ports=[(host, port)])

    class Plain(stomp.ConnectionListener):
        def on_message(self, frame):
            with got.cond:
                got.messages.append(frame.headers)
                got.cond.notify_all()

    receiver.set_listener("", Plain())
    receiver.connect(None, key, wait=True)
    receiver.subscribe("/queue/reader", id="p", ack="auto")
    sender.connect(None, ops, wait=True)
    sender.send(destination="/queue/reader", body="hello",
                headers={"x-correlation": "abc-1", "priority-hint": "high",
                         "switchboard-sender": "forged"})
    got.wait(lambda l: l.messages, "the plain message")
    headers = got.messages[0]
    sender.disconnect()
    receiver.disconnect()
    return {"headers": headers}


SCENARIOS = {"broadcast": broadcast, "dropped": dropped, "any_order": any_order,
             "answer_rest": answer_rest, "plain_headers": plain_headers}


def main():
    scenario, host, port, http, team, key, ops = sys.argv[1:8]
    result = SCENARIOS[scenario](host, int(port), f"http://{host}:{http}", team, key, ops)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
