"""Generated clients against a real server: schemathesis as an agent, a team key and the admin.

Usage: python tests/interop/spec_fuzz.py path/to/switchboard [seconds-per-caller]

Starts the server on a free loopback port with a fresh SQLite file, creates a team, two
agents, a message that needs a response and a few tasks (one waiting on a question),
then runs schemathesis from the committed openapi/openapi.json with every check except
`positive_data_acceptance`, which fails any refusal (a 409 on a finished task too). In
its place st_hooks.py's `schema_valid_request_refused` fails a request generated as
valid that is refused for a rule the document could have stated; the few it cannot
(an issued cursor, a WebSocket upgrade, a future deadline) are listed there. Any 5xx,
response that breaks its schema, or invalid request accepted fails the run too.
Bounded: each caller gets a time budget.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ADMIN = "spec-fuzz-admin-token-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base, method, path, token, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)
    except urllib.error.HTTPError as err:
        raise SystemExit(f"setup {method} {path}: {err.code} {err.read()!r}")


def wait_ready(base, server):
    for _ in range(200):
        if server.poll() is not None:
            raise SystemExit("the server exited during start")
        try:
            urllib.request.urlopen(base + "/readyz", timeout=1)
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the server did not become ready")


def make_world(base):
    team = call(base, "POST", "/v1/teams", ADMIN, {"team_id": "fuzz", "name": "Fuzz team"})
    key = team["team_key"]
    tokens = {}
    for agent in ("alpha", "beta"):
        registered = call(
            base,
            "POST",
            "/v1/teams/fuzz/agents",
            key,
            {"agent_id": agent, "role": "worker", "capabilities": ["review"]},
        )
        tokens[agent] = registered["token"]
    message = call(
        base,
        "POST",
        "/v1/messages",
        tokens["alpha"],
        {
            "sender_agent_id": "alpha",
            "recipient_agent_ids": ["beta"],
            "message_type": "request",
            "requires_response": True,
            "content": {"text": "Please review"},
        },
    )
    tasks = []
    for i in range(3):
        submitted = call(
            base,
            "POST",
            "/v1/tasks",
            tokens["alpha"],
            {"task_id": f"task-{i}", "description": "Review it", "originating_agent_id": "alpha",
             "target_agent_id": "beta"},
        )
        tasks.append(submitted["task"]["task_id"])
    asked = call(
        base,
        "POST",
        "/v1/tasks/task-0/clarifications",
        tokens["beta"],
        {"question": "Which part?"},
    )
    return {
        "team_id": "fuzz",
        "team_key": key,
        "tokens": tokens,
        "agents": ["alpha", "beta"],
        "message_id": message["message_id"],
        "tasks": tasks,
        "clarification_id": asked["task"]["open_clarification"]["clarification_id"],
    }


def run_schemathesis(base, world, label, caller, token, seconds):
    env = dict(os.environ)
    env["SPEC_FUZZ_WORLD"] = json.dumps({**world, "caller": caller, "seed": 17})
    env["SCHEMATHESIS_HOOKS"] = os.path.join(ROOT, "tests", "interop", "st_hooks.py")
    command = [
        os.path.join(os.path.dirname(sys.executable), "schemathesis"),
        "run",
        os.path.join(ROOT, "openapi", "openapi.json"),
        "--url", base,
        "-H", f"Authorization: Bearer {token}",
        "--checks", "all",
        "--exclude-checks", "positive_data_acceptance",
        "--phases", "examples,coverage,fuzzing,stateful",
        "--max-time", str(seconds),
        # One worker: CPython 3.11's compiler is not safe for schemathesis's threads.
        "--workers", "1",
        "--suppress-health-check", "all",
        "--seed", "17",
        "--request-timeout", "10",
        "--warnings", "off",
    ]
    print(f"\n=== schemathesis as {label} ({seconds}s) ===", flush=True)
    # schemathesis keeps a crash cache (.schemathesis/) in its working directory and
    # replays it on the next run: keep it under target/, out of the repository and out
    # of a fresh clone's verdict.
    scratch = os.path.join(ROOT, "target", "spec-fuzz")
    os.makedirs(scratch, exist_ok=True)
    return subprocess.run(command, env=env, cwd=scratch).returncode


def main():
    binary = sys.argv[1]
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as folder:
        server = subprocess.Popen(
            [binary, "serve", "--listen", f"127.0.0.1:{port}",
             "--database", os.path.join(folder, "fuzz.db"), "--admin-token", ADMIN,
             # The hooks make every URL the server would call a closed loopback port.
             "--allow-private-callbacks"],
            stdout=open(os.path.join(folder, "server.log"), "w"),
            stderr=subprocess.STDOUT,
        )
        try:
            wait_ready(base, server)
            world = make_world(base)
            failed = []
            for label, caller, token in (
                ("agent alpha", "alpha", world["tokens"]["alpha"]),
                ("agent beta", "beta", world["tokens"]["beta"]),
                ("the team key", None, world["team_key"]),
                ("the admin", None, ADMIN),
            ):
                if run_schemathesis(base, world, label, caller, token, seconds) != 0:
                    failed.append(label)
            if server.poll() is not None:
                failed.append("the server died")
        finally:
            server.terminate()
            server.wait(timeout=30)
            with open(os.path.join(folder, "server.log")) as log:
                panics = [line for line in log if "panicked" in line]
        if panics:
            failed.append(f"{len(panics)} panics in the server log")
    if failed:
        print(f"\nspec fuzz FAILED: {', '.join(failed)}")
        return 1
    print("\nspec fuzz: 4 callers, no failure")
    return 0


if __name__ == "__main__":
    sys.exit(main())
