"""Instructions per SEND_MESSAGE, counted by valgrind's callgrind: a measure of the
server's own work per send that does not drift with the machine.

A/B runs of the send rate on this kind of machine drift by several percent from one run
to the next (`docs/benchmarks.md`), more than many changes are worth. Callgrind counts the
instructions a process executes (user space only: not the kernel's share of a send, not
cache misses), the same for the same binary and inputs whatever else the machine does.
Each side's server runs under callgrind twice, for SMALL and LARGE sends made one after
another over one keep-alive connection; the difference, divided by LARGE - SMALL, is what
one send costs without start-up (which itself varies from run to run by a few million
instructions: lazily built tables, certificates read). SQLite's WAL and checkpoint
functions are shown apart: how much a send pays for them depends on when the checkpoints
fall, which the timing of a run decides.

Usage (release builds; `valgrind` from Debian's packages):

    python3 benches/instructions.py A=/tmp/before/switchboard \\
        off=target/release/switchboard \\
        on=target/release/switchboard,SWITCHBOARD_OTLP_ENDPOINT=http://127.0.0.1:4320

Each side is `label=binary` followed by `,NAME=VALUE` settings for its environment, as
`send_ab`'s `BENCH_AB`. `--sends SMALL,LARGE` (default 1000,3000); `--top N` (default
12): the functions whose cost per send differs most from the first side's; `--stomp`:
STOMP SENDs with a receipt (the frames Wise Agents sends, to `/queue/request/b`) instead
of REST sends. Runs two
servers at a time; about three minutes a side.

Work the server does on a timer (checkpoints, sweeps, flushes) is counted per send too,
in proportion to how long a run takes under callgrind: a side whose sends take longer
pays more of it. The list of functions shows where a difference comes from.
"""

import concurrent.futures
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

from ports import free_port

ADMIN = "instructions-admin-token-0123456789"
WAL = re.compile(r"\b(wal[A-Z]\w*|sqlite3WalCheckpoint\w*|\w*[Cc]heckpoint\w*)\b")


def call(conn, path, token, body):
    conn.request("POST", path, body=json.dumps(body),
                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    answer = conn.getresponse()
    data = answer.read()
    return answer.status, json.loads(data) if data else None


def setup(port):
    """A team of two agents; the connection and the sender's token."""
    for _ in range(1200):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            conn.connect()
            break
        except OSError:
            time.sleep(0.25)
    _, team = call(conn, "/v1/teams", ADMIN, {"name": "bench", "team_id": "bench"})
    tokens = []
    for agent in ["a", "b"]:
        _, made = call(conn, "/v1/teams/bench/agents", team["team_key"],
                       {"agent_id": agent, "role": "worker", "capabilities": []})
        tokens.append(made["token"])
    return conn, tokens[0]


def rest_sends(conn, token, _stomp_port, sends):
    body = {"sender_agent_id": "a", "recipient_agent_ids": ["b"],
            "message_type": "information",
            "content": {"text": "hello there, a message of ordinary size"}}
    for _ in range(sends):
        status, answer = call(conn, "/v1/messages", token, body)
        if status != 201:
            raise RuntimeError(f"send answered {status}: {answer}")


def stomp_sends(_conn, token, stomp_port, sends):
    body = ("!wiseagents.WiseAgentMessage\n_context_name: null\n"
            "_message: hello there, a message of ordinary size\n_message_type: QUERY\n"
            "_route_response_to: null\n_sender: a\n_tool_id: null\n").encode()
    with socket.create_connection(("127.0.0.1", stomp_port), timeout=120) as stomp:
        stomp.sendall(f"CONNECT\naccept-version:1.2\npasscode:{token}\n\n\0".encode())
        frames = Frames(stomp)
        if frames.next() != "CONNECTED":
            raise RuntimeError("STOMP CONNECT refused")
        for i in range(sends):
            stomp.sendall(b"SEND\ndestination:/queue/request/b\ncontent-type:text/plain\n"
                          + f"receipt:r{i}\ncontent-length:{len(body)}\n\n".encode()
                          + body + b"\0")
            if frames.next() != "RECEIPT":
                raise RuntimeError("a SEND got no RECEIPT")


class Frames:
    """STOMP frames read off a socket, one command at a time."""

    def __init__(self, sock):
        self.sock, self.buffered = sock, b""

    def next(self):
        while b"\0" not in self.buffered.lstrip(b"\r\n"):
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("the STOMP connection closed")
            self.buffered += chunk
        frame, self.buffered = self.buffered.lstrip(b"\r\n").split(b"\0", 1)
        return frame.split(b"\n", 1)[0].decode()


def count(binary, env, sends, sending):
    """The instructions each function executed itself in a run, by name."""
    with tempfile.TemporaryDirectory() as tmp:
        port, stomp_port = free_port(), free_port()
        out = os.path.join(tmp, "callgrind.out")
        server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
             f"--log-file={os.path.join(tmp, 'valgrind.log')}",
             binary, "serve", "--listen", f"127.0.0.1:{port}", "--admin-token", ADMIN,
             "--stomp-listen", f"127.0.0.1:{stomp_port}",
             "--database", os.path.join(tmp, "bench.db")],
            env={**os.environ, "RUST_LOG": "warn,switchboard::server=info", **env},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            conn, token = setup(port)
            sending(conn, token, stomp_port, sends)
            # What the server does after the answers (a span batch's linger) counts too.
            time.sleep(2)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait()
        annotated = subprocess.run(["callgrind_annotate", "--threshold=100", out],
                                   capture_output=True, text=True, check=True).stdout
        functions = {}
        for line in annotated.splitlines():
            m = re.match(r"^\s*([\d,]+)\s+\([^)]*\)\s+(\S.*?)( \[.*\])?$", line)
            if not m or "PROGRAM TOTALS" in line:
                continue
            name = m.group(2)
            functions[name] = functions.get(name, 0) + int(m.group(1).replace(",", ""))
        return functions


def per_send(small_run, large_run, sends):
    """Each function's instructions per send: the two runs' difference over theirs."""
    names = set(small_run) | set(large_run)
    return {n: (large_run.get(n, 0) - small_run.get(n, 0)) / sends for n in names}


def side(spec):
    label, _, rest = spec.partition("=")
    binary, *settings = rest.split(",")
    env = dict(s.split("=", 1) for s in settings)
    return label, binary, env


def main():
    args = sys.argv[1:]
    small, large, top, sending = 1000, 3000, 12, rest_sends
    while args and args[0].startswith("--"):
        if args[0] == "--stomp":
            sending, args = stomp_sends, args[1:]
            continue
        if args[0] == "--sends":
            small, large = (int(n) for n in args[1].split(","))
        elif args[0] == "--top":
            top = int(args[1])
        args = args[2:]
    sides = [side(s) for s in args]
    if not sides:
        sys.exit(__doc__)
    runs = [(binary, env, n, sending) for _, binary, env in sides for n in (small, large)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        counted = list(pool.map(lambda r: count(*r), runs))
    costs = [per_send(counted[2 * i], counted[2 * i + 1], large - small) for i in range(len(sides))]
    first = sides[0][0]
    print(f"| side | instructions per send | SQLite WAL and checkpoints | the rest | the rest against {first} |")
    print("|---|---|---|---|---|")
    base = None
    for (label, _, _), cost in zip(sides, costs):
        total = sum(cost.values())
        wal = sum(v for n, v in cost.items() if WAL.search(n))
        base = base or total - wal
        print(f"| {label} | {total:,.0f} | {wal:,.0f} | {total - wal:,.0f} | "
              f"{100 * ((total - wal) / base - 1):+.1f} % |")
    for (label, _, _), cost in list(zip(sides, costs))[1:]:
        print(f"\nWhere {label} differs from {first} most (instructions per send, WAL included):")
        names = set(cost) | set(costs[0])
        diffs = sorted(names, key=lambda n: -abs(cost.get(n, 0) - costs[0].get(n, 0)))
        for name in diffs[:top]:
            print(f"  {cost.get(name, 0) - costs[0].get(name, 0):+9,.0f}  {name[:110]}")


if __name__ == "__main__":
    main()
