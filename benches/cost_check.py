"""The cost of an operation, counted by callgrind, against a committed baseline.

Rates drift by several percent from one run to the next on this kind of machine, more
than many changes cost; creep of that size adds up unseen (issue 63). Callgrind counts
what the server executes — the same for the same binary and inputs whatever else the
machine does — so CI can see a change's cost at the commit that makes it.

A server runs under callgrind doing N operations of each kind, one kind after another;
after each phase `callgrind_control --dump` cuts the counts, so each phase is counted
apart. Start-up and set-up run uninstrumented; counting starts once the server is idle.
The server runs with its background intervals stretched (`--tick-scale`, src/ticks.rs):
a checkpoint or a health ping that fell into a phase by the clock made phases differ by
up to 1.8 % of their instructions and 1.1 % of their allocations; stretched, they differ
by about 0.5 % and 0.3 allocations per operation. An idle phase measures what is left
per second (a few thousand instructions), which is taken off each phase for its length.
Per operation: a phase over N (connections are set up outside the phases), the median of
RUNS such servers. Counted:

* instructions (user space; not the kernel's share, not cache misses);
* allocations: calls into Rust's allocation entry points (`__rust_alloc`, its zeroed and
  `realloc` kin) and C's `malloc` family (SQLite's) — exact where instructions are not
  sensitive enough (one allocation is about 0.01 % of a send's instructions here).

The kinds: a REST SEND_MESSAGE; a STOMP SEND with a receipt (the frames Wise Agents
sends); a REST send to a recipient connected by WebSocket, the push included; an MCP
`send_message` tool call (stateless); a task round trip (a `TaskRequest` submitted, its
success result reported).

Usage:

    python3 benches/cost_check.py BINARY                 # compare with the baseline
    python3 benches/cost_check.py BINARY --write REASON  # measure and write the baseline

The baseline (`benches/cost_baseline.json`) is of the build CI tests (the debug build
`cargo test` makes: no second build in CI), and says why it last changed. The check fails
when a kind's instructions grow by more than INSTRUCTIONS_SLACK or its allocations by more
than ALLOCATIONS_SLACK per request it makes (one allocation more per send fails it): a change that costs more updates the baseline in the
same commit, with its reason. A cheaper result passes, and says so. Needs `valgrind`.
"""

import glob
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from websockets.sync.client import connect as ws_connect

from ports import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINE = os.path.join(ROOT, "benches", "cost_baseline.json")
ADMIN = "cost-check-admin-token-0123456789"
N = 300
RUNS = 3
# Seconds of an idle phase: what the server's timers cost per second is subtracted from
# each phase for its length, so a slower (or busier) machine does not count more.
IDLE = 3
KINDS = ["rest_send", "stomp_send", "ws_push", "mcp_call", "task_round_trip"]
# Growth that fails the check: instructions as a fraction, allocations per request (a task
# round trip makes two). Four times the spread of three runs of one binary.
INSTRUCTIONS_SLACK = 0.02
ALLOCATIONS_SLACK = 0.5
REQUESTS = {"rest_send": 1, "stomp_send": 1, "ws_push": 1, "mcp_call": 1, "task_round_trip": 2}
# Rust's allocation entry points (whatever the global allocator: mimalloc here) and the C
# allocator SQLite uses.
ALLOCATORS = {"__rustc::__rust_alloc", "__rustc::__rust_alloc_zeroed", "__rustc::__rust_realloc",
              "malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc"}


def call(conn, method, path, token, body=None, headers=None):
    sent = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    sent.update(headers or {})
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=sent)
    answer = conn.getresponse()
    data = answer.read()
    if answer.status >= 300:
        raise RuntimeError(f"{method} {path} answered {answer.status}: {data[:300]!r}")
    try:
        return json.loads(data) if data else None
    except ValueError:
        return data.decode(errors="replace")


def connected(port):
    for _ in range(2400):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            conn.connect()
            return conn
        except OSError:
            time.sleep(0.25)
    raise RuntimeError("the server did not start")


def stomp_frames(sock, count):
    """Reads `count` frames (NUL-terminated) off `sock`; their commands."""
    buffered, commands = b"", []
    while len(commands) < count:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("the STOMP connection closed")
        buffered += chunk
        while b"\0" in buffered:
            frame, buffered = buffered.split(b"\0", 1)
            frame = frame.lstrip(b"\r\n")
            if frame:
                commands.append(frame.split(b"\n", 1)[0].decode())
    return commands


def wise_body(text):
    return ("!wiseagents.WiseAgentMessage\n"
            f"_context_name: null\n_message: {json.dumps(text)}\n_message_type: QUERY\n"
            "_route_response_to: null\n_sender: a\n_tool_id: null\n")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pid):
    """Waits until the server is idle (start-up work done: under callgrind building its
    outgoing HTTP clients alone takes seconds), so none of it is counted in a phase."""
    last = cpu_seconds(pid)
    for _ in range(300):
        time.sleep(1)
        now = cpu_seconds(pid)
        if now - last < 0.05:
            return
        last = now
    raise RuntimeError("the server never went idle")


def phases(http_port, stomp_port, n, dump, pid):
    """The operations, `n` of each kind, with `dump()` after each phase; an idle phase of
    IDLE seconds first, to subtract what the server does on its timers."""
    conn = connected(http_port)
    team = call(conn, "POST", "/v1/teams", ADMIN, {"name": "cost", "team_id": "cost"})
    tokens = {}
    for agent in ["a", "b"]:
        made = call(conn, "POST", "/v1/teams/cost/agents", team["team_key"],
                    {"agent_id": agent, "role": "worker", "capabilities": ["work"]})
        tokens[agent] = made["token"]
    send = {"sender_agent_id": "a", "recipient_agent_ids": ["b"], "message_type": "information",
            "content": {"text": "hello there, a message of ordinary size"}}
    stomp = socket.create_connection(("127.0.0.1", stomp_port), timeout=300)
    stomp.sendall(f"CONNECT\naccept-version:1.2\npasscode:{tokens['a']}\n\n\0".encode())
    if stomp_frames(stomp, 1) != ["CONNECTED"]:
        raise RuntimeError("STOMP CONNECT refused")
    # Start-up and set-up run uninstrumented (callgrind's instrumentation slows them
    # about tenfold: most of a run's time was building the outgoing HTTP clients).
    subprocess.run(["callgrind_control", "--instr=on", str(pid)], check=True, capture_output=True)
    settle(pid)
    dump()
    time.sleep(IDLE)
    dump()

    for _ in range(n):
        call(conn, "POST", "/v1/messages", tokens["a"], send)
    dump()

    body = wise_body("hello there, a message of ordinary size").encode()
    for i in range(n):
        stomp.sendall(b"SEND\ndestination:/queue/request/b\ncontent-type:text/plain\n"
                      + f"receipt:r{i}\ncontent-length:{len(body)}\n\n".encode() + body + b"\0")
        if stomp_frames(stomp, 1) != ["RECEIPT"]:
            raise RuntimeError("a SEND got no RECEIPT")
    dump()

    with ws_connect(f"ws://127.0.0.1:{http_port}/v1/ws?access_token={tokens['b']}",
                    max_size=None) as ws:
        # Caught up first: what the earlier phases left in b's inbox is replayed now.
        while json.loads(ws.recv(timeout=300)).get("type") != "caught_up":
            pass
        dump()
        for _ in range(n):
            call(conn, "POST", "/v1/messages", tokens["a"], send)
            while json.loads(ws.recv(timeout=300)).get("type") != "message":
                pass
        dump()

    mcp = {"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2026-07-28",
           "Mcp-Method": "tools/call", "Mcp-Name": "send_message"}
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "cost", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}
    for i in range(n):
        answer = call(conn, "POST", "/mcp", tokens["a"], {
            "jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "send_message", "_meta": meta, "arguments": {
                "recipient_agent_ids": ["b"], "message_type": "information",
                "content": {"text": "hello over MCP"}}}}, mcp)
        # A refusal is a tool result too (HTTP 200): counted, it would be a refusal's cost.
        if not isinstance(answer, dict) or answer.get("result", {}).get("isError", True):
            raise RuntimeError(f"the MCP send was refused: {str(answer)[:300]}")
    dump()

    for i in range(n):
        call(conn, "POST", "/v1/tasks", tokens["a"],
             {"task_id": f"t{i}", "description": "Do it", "originating_agent_id": "a",
              "target_agent_id": "b"})
        call(conn, "POST", f"/v1/tasks/t{i}/result", tokens["b"],
             {"status": "success", "result_data": {"ok": True}})
    dump()
    stomp.close()


def measure(binary, n):
    """Per phase (setup, then KINDS with one extra cut before the pushes): (instructions,
    allocations) of a server run doing `n` operations of each kind."""
    with tempfile.TemporaryDirectory() as tmp:
        http_port, stomp_port = free_port(), free_port()
        out = os.path.join(tmp, "cg.out")
        server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--instr-atstart=no",
             f"--log-file={os.path.join(tmp, 'valgrind.log')}", binary, "serve",
             "--listen", f"127.0.0.1:{http_port}", "--stomp-listen", f"127.0.0.1:{stomp_port}",
             "--admin-token", ADMIN, "--database", os.path.join(tmp, "cost.db"),
             # No timer's work in a phase: see src/ticks.rs.
             "--tick-scale", "10000", "--ws-ping-interval", "36000",
             "--retention-interval", "10000h"],
            env={**os.environ, "RUST_LOG": "warn"},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dumps = 0

        cuts = []

        def dump():
            nonlocal dumps
            subprocess.run(["callgrind_control", "--dump", str(server.pid)],
                           check=True, capture_output=True)
            cuts.append(time.monotonic())
            dumps += 1
            # The dump is written when valgrind next looks for commands.
            for _ in range(600):
                if len(glob.glob(out + ".*")) >= dumps:
                    return
                time.sleep(0.1)
            raise RuntimeError("callgrind wrote no dump")

        try:
            phases(http_port, stomp_port, n, dump, server.pid)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait()
        files = sorted(glob.glob(out + ".*"), key=lambda f: int(f.rsplit(".", 1)[1]))
        counted = [count(f) for f in files]
    lengths = [b - a for a, b in zip(cuts, cuts[1:])]
    # Cuts: setup | idle | rest | stomp | (catch-up) | ws | mcp | tasks.
    idle = counted[1]
    rate = (idle[0] / lengths[0], idle[1] / lengths[0])

    def less_idle(i):
        seconds = lengths[i - 1]
        return (counted[i][0] - rate[0] * seconds, counted[i][1] - rate[1] * seconds)

    return dict(zip(KINDS, [less_idle(i) for i in (2, 3, 5, 6, 7)])) | {"idle per second": rate}


def count(path):
    """(instructions, allocator calls) of one callgrind dump."""
    names, callee, instructions, allocations = {}, None, 0, 0
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                instructions = int(line.split()[1])
            elif line.startswith(("cfn=", "fn=")):
                m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line.strip())
                if m:
                    if m.group(2):
                        names[m.group(1)] = m.group(2)
                    name = names.get(m.group(1), "")
                    callee = name if line.startswith("cfn=") else None
            elif line.startswith("calls=") and callee in ALLOCATORS:
                allocations += int(line.split("=", 1)[1].split()[0])
    return instructions, allocations


def per_operation(binary):
    """Each kind's phase over its N operations, the median of RUNS runs (two at a time).

    Not the difference of a small and a large run: that doubles the runs' noise and
    divides it by the difference (two runs of one binary differed by up to 7 % so). A
    phase's total at a fixed N varied by 0.01-1.3 % in instructions and 0.3-1.7 % in
    allocations; what varies is the server's timer work during the phase."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda _: measure(binary, N), range(RUNS)))

    def median(values):
        return sorted(values)[len(values) // 2]

    return {kind: {"instructions": round(median([r[kind][0] for r in runs]) / N),
                   "allocations": round(median([r[kind][1] for r in runs]) / N, 2)}
            for kind in KINDS}


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    binary = args[0]
    measured = per_operation(binary)
    if args[1:2] == ["--write"]:
        reason = " ".join(args[2:]) or sys.exit("--write needs a reason")
        with open(BASELINE, "w") as f:
            json.dump({"reason": reason, "build": "debug (cargo test's)",
                       "operations": measured}, f, indent=2)
            f.write("\n")
        print(json.dumps(measured, indent=2))
        return 0
    with open(BASELINE) as f:
        baseline = json.load(f)
    failed = []
    print("| operation | instructions | baseline | change | allocations | baseline | change |")
    print("|---|---|---|---|---|---|---|")
    for kind in KINDS:
        now, then = measured[kind], baseline["operations"][kind]
        grew = now["instructions"] / then["instructions"] - 1
        more = now["allocations"] - then["allocations"]
        print(f"| {kind} | {now['instructions']:,} | {then['instructions']:,} | {100 * grew:+.2f} % "
              f"| {now['allocations']:.2f} | {then['allocations']:.2f} | {more:+.2f} |")
        if grew > INSTRUCTIONS_SLACK:
            failed.append(f"{kind}: {100 * grew:+.1f} % instructions")
        if more > ALLOCATIONS_SLACK * REQUESTS[kind]:
            failed.append(f"{kind}: {more:+.2f} allocations per operation")
    print(f"\nbaseline: {baseline['reason']}")
    if failed:
        print("\ncost check FAILED: " + "; ".join(failed))
        print("If the cost is meant, write the baseline in the same commit, with why:\n"
              f"  python3 benches/cost_check.py {binary} --write '<reason>'")
        return 1
    print("\ncost check: no operation costs more than its baseline allows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
