"""STOMP as stomp.py speaks it in each version, against Switchboard.

Usage: stomp_protocol.py SCENARIO CONFIG_JSON
CONFIG_JSON: {"host", "port", "team", "key", "other_team", "other_key",
              "a": [agent_id, token], "b": [agent_id, token]}
Prints one JSON object; exits non-zero when a check fails. Run by tests/it/stomp/.
"""

import json
import sys
import time

import stomp
import yaml

from stomp_listener import Listener


def body(text, sender):
    return (
        "!wiseagents.WiseAgentMessage\n"
        f"_context_name: null\n_message: {json.dumps(text)}\n_message_type: QUERY\n"
        f"_route_response_to: null\n_sender: {sender}\n_tool_id: null\n"
    )


yaml.add_constructor("!wiseagents.WiseAgentMessage",
                     lambda loader, node: loader.construct_mapping(node), Loader=yaml.Loader)


def loaded(frame):
    return yaml.load(frame.body, Loader=yaml.Loader)["_message"]


def connect(cfg, cls, login, passcode, heartbeats=(0, 0)):
    options = {} if cls is stomp.Connection10 else {"heartbeats": heartbeats}
    conn = cls(host_and_ports=[(cfg["host"], cfg["port"])], **options)
    listener = Listener()
    conn.set_listener("", listener)
    conn.connect(login, passcode, wait=True)
    return conn, listener


def send_all(conn, listener, to, sender, texts):
    """SEND each with a receipt: a receipt means committed."""
    for i, text in enumerate(texts):
        conn.send(destination=f"/queue/request/{to}", body=body(text, sender),
                  receipt=f"r-{text}")
    listener.wait(lambda l: len(l.receipts) >= len(texts), "the receipts")


def acks(cfg):
    """Connection12 (host header): client-individual ACK/NACK, redelivery after a
    reconnect of what was not acknowledged; then `client` mode acknowledges cumulatively."""
    (a_id, a_token), (b_id, b_token) = cfg["a"], cfg["b"]
    sender, sl = connect(cfg, stomp.Connection12, None, b_token)
    send_all(sender, sl, a_id, b_id, ["one", "two", "three"])
    conn, l = connect(cfg, stomp.Connection12, None, a_token)
    conn.subscribe(f"/queue/request/{a_id}", id="s1", ack="client-individual")
    l.wait(lambda l: len(l.messages) >= 3, "three messages")
    first = [loaded(m) for m in l.messages]
    one, two, three = l.messages
    conn.ack(one.headers["ack"])
    conn.nack(two.headers["ack"])
    conn.ack(three.headers["ack"], receipt="acked")
    l.wait(lambda l: "acked" in l.receipts, "the ACK's receipt")
    conn.disconnect()
    time.sleep(1.5)  # cursors are saved once a second; a reconnect reads them

    conn, l = connect(cfg, stomp.Connection12, None, a_token)
    conn.subscribe(f"/queue/request/{a_id}", id="s2", ack="client")
    l.wait(lambda l: len(l.messages) >= 1, "the redelivery")
    time.sleep(0.3)
    again = [loaded(m) for m in l.messages]
    assert again == ["two"], again
    send_all(sender, sl, a_id, b_id, ["four", "five"])
    l.wait(lambda l: len(l.messages) >= 3, "two more")
    # `client`: acknowledging the last consumes everything before it.
    conn.ack(l.messages[-1].headers["ack"], receipt="all")
    l.wait(lambda l: "all" in l.receipts, "the receipt")
    conn.disconnect()
    time.sleep(1.5)
    conn, l = connect(cfg, stomp.Connection12, None, a_token)
    conn.subscribe(f"/queue/request/{a_id}", id="s3", ack="auto")
    time.sleep(0.5)
    assert not l.messages, [loaded(m) for m in l.messages]
    conn.disconnect()
    sender.disconnect()
    return {"first": first, "redelivered": again}


def transactions(cfg):
    """BEGIN/ABORT drops the SENDs; BEGIN/COMMIT sends them, in order."""
    (a_id, a_token), (b_id, b_token) = cfg["a"], cfg["b"]
    conn, l = connect(cfg, stomp.Connection12, None, a_token)
    conn.subscribe(f"/queue/request/{a_id}", id="s", ack="auto")
    sender, sl = connect(cfg, stomp.Connection11, None, b_token)
    sender.begin("t1")
    sender.send(destination=f"/queue/request/{a_id}", body=body("dropped", b_id), transaction="t1")
    sender.abort("t1")
    sender.begin("t2")
    for text in ["kept-1", "kept-2"]:
        sender.send(destination=f"/queue/request/{a_id}", body=body(text, b_id), transaction="t2")
    time.sleep(0.3)
    assert not l.messages, "nothing goes out before COMMIT"
    sender.commit("t2", receipt="committed")
    sl.wait(lambda l: "committed" in l.receipts, "the COMMIT's receipt")
    l.wait(lambda l: len(l.messages) >= 2, "the committed messages")
    time.sleep(0.3)
    got = [loaded(m) for m in l.messages]
    assert got == ["kept-1", "kept-2"], got
    conn.disconnect()
    sender.disconnect()
    return {"got": got}


def version10(cfg):
    """Connection10: no accept-version, no ids; ack by message-id."""
    (a_id, a_token), (b_id, b_token) = cfg["a"], cfg["b"]
    conn, l = connect(cfg, stomp.Connection10, None, a_token)
    conn.subscribe(f"/queue/request/{a_id}", ack="client")
    sender, sl = connect(cfg, stomp.Connection10, None, b_token)
    send_all(sender, sl, a_id, b_id, ["ten"])
    l.wait(lambda l: l.messages, "the message")
    message = l.messages[0]
    conn.ack(message.headers["message-id"], receipt="ok")
    l.wait(lambda l: "ok" in l.receipts, "the receipt")
    conn.disconnect()
    sender.disconnect()
    return {"got": loaded(message), "headers": dict(message.headers)}


def escaping(cfg):
    """1.2 header escaping both ways: a subscription id with a colon, a backslash, a CR
    and a newline comes back unchanged in MESSAGE's subscription and ack headers; a
    NUL-bearing body framed by content-length is read whole (then refused as YAML)."""
    (a_id, a_token), (b_id, b_token) = cfg["a"], cfg["b"]
    odd = "sub:with\\odd\r\nchars"
    conn, l = connect(cfg, stomp.Connection12, None, a_token)
    conn.subscribe(f"/queue/request/{a_id}", id=odd, ack="client-individual")
    sender, sl = connect(cfg, stomp.Connection12, None, b_token)
    send_all(sender, sl, a_id, b_id, ["escaped"])
    l.wait(lambda l: l.messages, "the message")
    message = l.messages[0]
    assert message.headers["subscription"] == odd, message.headers
    conn.ack(message.headers["ack"], receipt="acked")
    l.wait(lambda l: "acked" in l.receipts, "the ACK routed by the escaped id")
    conn.disconnect()
    nul = body("before", b_id).replace("before", "bef\x00ore")
    sender.send(destination=f"/queue/request/{a_id}", body=nul)
    sl.wait(lambda l: l.errors, "the ERROR")
    return {"subscription": message.headers["subscription"], "nul_error": sl.errors[0]}


def heartbeats(cfg):
    """The server sends heart-beats as often as the client asks (here every 300 ms)."""
    (a_id, a_token) = cfg["a"]
    conn, l = connect(cfg, stomp.Connection12, None, a_token, heartbeats=(0, 300))
    l.wait(lambda l: l.heartbeats >= 3, "three heart-beats", timeout=5)
    conn.disconnect()
    return {"heartbeats": l.heartbeats}


def refused(cfg, conn, l, what):
    l.wait(lambda l: l.errors, f"the ERROR ({what})")
    l.wait(lambda l: l.disconnected, f"the disconnect ({what})")
    return l.errors[0]


def refused_open(cfg, conn, l, what):
    """A refused SEND: an ERROR, and the connection goes on (a receipt still comes)."""
    l.wait(lambda l: l.errors, f"the ERROR ({what})")
    receipt = f"still-open-{len(l.errors)}"
    conn.disconnect(receipt=receipt)
    assert receipt in l.receipts, (what, l.receipts, l.errors)
    return l.errors[0]


def rules(cfg):
    """Who may do what: an agent token subscribes only to its own queues; a team key
    works only with its own team's id as login; an agent token sends only as itself;
    limits on frames and headers. A refused SEND leaves the connection open; a refused
    SUBSCRIBE or CONNECT, or a broken limit of the connection, closes it."""
    (a_id, a_token), (b_id, _) = cfg["a"], cfg["b"]
    out = {}
    conn, l = connect(cfg, stomp.Connection12, None, a_token)
    conn.subscribe(f"/queue/request/{b_id}", id="x")
    out["other_agents_queue"] = refused(cfg, conn, l, "another agent's queue")

    conn = stomp.Connection12(host_and_ports=[(cfg["host"], cfg["port"])])
    l = Listener()
    conn.set_listener("", l)
    try:
        conn.connect(cfg["team"], cfg["other_key"], wait=True)
    except stomp.exception.ConnectFailedException:
        pass
    out["other_teams_key"] = refused(cfg, conn, l, "another team's key")

    conn, l = connect(cfg, stomp.Connection11, None, a_token)
    conn.send(destination=f"/queue/request/{a_id}", body=body("spoofed", b_id))
    out["agent_spoofing"] = refused_open(cfg, conn, l, "an agent sending as another")

    conn, l = connect(cfg, stomp.Connection12, None, a_token)
    conn.send(destination="/exchange/anything", body="x")
    out["unknown_destination"] = refused_open(cfg, conn, l, "an unknown destination")

    # The team key acts for the agents its bridge serves, never as one with a token of
    # its own (bob): it cannot consume bob's queue, nor send as bob.
    conn, l = connect(cfg, stomp.Connection11, cfg["team"], cfg["key"])
    conn.send(destination=f"/queue/request/{a_id}", body=body("as bob", b_id))
    out["bridge_as_own_token_agent"] = refused_open(cfg, conn, l, "a bridge sending as bob")
    conn, l = connect(cfg, stomp.Connection11, cfg["team"], cfg["key"])
    conn.subscribe(f"/queue/request/{b_id}", id="1")
    out["bridge_reads_own_token_agent"] = refused(cfg, conn, l, "a bridge reading bob's queue")

    conn, l = connect(cfg, stomp.Connection11, cfg["team"], cfg["key"])
    conn.subscribe(f"/queue/request/{a_id}", id="1")
    conn.send(destination=f"/queue/{b_id}", body="plain")
    out["bridge_plain"] = refused_open(cfg, conn, l, "a bridge sending a plain message")

    conn, l = connect(cfg, stomp.Connection12, None, a_token)
    conn.begin("big")
    for i in range(1025):
        if l.errors:
            break
        try:
            conn.send(destination=f"/queue/request/{b_id}", body=body("x", a_id), transaction="big")
        except Exception:  # the server may have closed already
            break
    out["transaction_too_large"] = refused(cfg, conn, l, "a transaction too large")

    conn, l = connect(cfg, stomp.Connection12, None, a_token)
    conn.send(destination=f"/queue/request/{b_id}", body=body("x" * 2_000_000, a_id))
    out["too_large"] = refused(cfg, conn, l, "a frame too large")

    conn, l = connect(cfg, stomp.Connection12, None, a_token)
    many = {f"h{i}": "v" for i in range(100)}
    conn.send(destination=f"/queue/request/{b_id}", body=body("x", a_id), headers=many)
    out["too_many_headers"] = refused(cfg, conn, l, "too many headers")

    conn, l = connect(cfg, stomp.Connection12, None, a_token)
    conn.send(destination=f"/queue/request/{b_id}", body=body("x", a_id), long="y" * 10_000)
    out["header_too_long"] = refused(cfg, conn, l, "a header too long")
    return out


def websocket(cfg):
    """STOMP over WebSocket (/v1/stomp) with stomp.py's WSConnection, talking with an
    agent on plain TCP, both ways."""
    (a_id, a_token), (b_id, b_token) = cfg["a"], cfg["b"]
    ws = stomp.WSConnection(host_and_ports=[(cfg["host"], cfg["http_port"])], ws_path="/v1/stomp")
    wl = Listener()
    ws.set_listener("", wl)
    ws.connect(None, a_token, wait=True)
    ws.subscribe(f"/queue/request/{a_id}", id="w", ack="client-individual")
    tcp, tl = connect(cfg, stomp.Connection12, None, b_token)
    tcp.subscribe(f"/queue/request/{b_id}", id="t", ack="auto")
    send_all(tcp, tl, a_id, b_id, ["over tcp"])
    wl.wait(lambda l: l.messages, "the message over the WebSocket")
    ws.ack(wl.messages[0].headers["ack"])
    ws.send(destination=f"/queue/request/{b_id}", body=body("over websocket", a_id), receipt="w1")
    wl.wait(lambda l: "w1" in l.receipts, "the receipt over the WebSocket")
    tl.wait(lambda l: l.messages, "the message over TCP")
    out = {"ws_got": loaded(wl.messages[0]), "tcp_got": loaded(tl.messages[0])}
    ws.disconnect()
    tcp.disconnect()
    return out


def plain(cfg):
    """Other destinations carry any body: /queue/<agent> byte for byte (an embedded NUL,
    bytes that are not UTF-8), /topic/<tag> to every subscriber of the tag; neither
    reaches the Wise Agents request queue."""
    (a_id, a_token), (b_id, b_token) = cfg["a"], cfg["b"]
    conn = stomp.Connection12(host_and_ports=[(cfg["host"], cfg["port"])], auto_decode=False)
    l = Listener()
    conn.set_listener("", l)
    conn.connect(None, a_token, wait=True)
    conn.subscribe(f"/queue/{a_id}", id="plain", ack="auto")
    conn.subscribe("/topic/news", id="news", ack="auto")
    conn.subscribe(f"/queue/request/{a_id}", id="wise", ack="auto")
    sender, sl = connect(cfg, stomp.Connection12, None, b_token)
    bodies = [b"hello\x00world", b"\xff\xfe not text", b"{\"json\": true}"]
    for i, raw in enumerate(bodies):
        sender.send(destination=f"/queue/{a_id}", body=raw, content_type="application/octet-stream",
                    receipt=f"p{i}")
    sender.send(destination="/topic/news", body="extra, extra", receipt="t")
    sl.wait(lambda l: {"p0", "p1", "p2", "t"} <= set(l.receipts), "the receipts")
    l.wait(lambda l: len(l.messages) >= 4, "four messages")
    time.sleep(0.3)
    by_sub = {}
    for m in l.messages:
        by_sub.setdefault(m.headers["subscription"], []).append(m)
    got = [m.body for m in by_sub.get("plain", [])]
    assert got == bodies, got
    assert by_sub["plain"][0].headers["content-type"] == "application/octet-stream"
    assert [m.body for m in by_sub.get("news", [])] == [b"extra, extra"], by_sub
    assert "wise" not in by_sub, "plain messages stay off the Wise Agents queue"
    conn.disconnect()
    sender.disconnect()
    return {"plain": len(got), "topic": by_sub["news"][0].headers["destination"]}


SCENARIOS = {"plain": plain, "websocket": websocket, "acks": acks, "transactions": transactions, "version10": version10,
             "escaping": escaping, "heartbeats": heartbeats, "rules": rules}


def main():
    cfg = json.loads(sys.argv[2])
    print(json.dumps(SCENARIOS[sys.argv[1]](cfg)), flush=True)


if __name__ == "__main__":
    main()
