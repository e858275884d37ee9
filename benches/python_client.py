"""The Python client's figures (issue 67): messages/s one `AsyncClient` sends with 64 in
flight, and push latency to a `listen()`er — to set beside the Rust bench's
`send_message` (64 connections) and `ws_push` rows, run in the same session. Sends are
measured over both transports (`AsyncClient(transport="http" | "websocket")`):

    cargo build --release --locked --bin switchboard
    target/pyenv-client/bin/python benches/python_client.py target/release/switchboard --duration 8
    cargo bench --bench load -- send_message ws_push --duration 8

It starts the server itself (a fresh SQLite file on a free port) and prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "clients" / "python"))

from switchboard_client import AsyncClient  # noqa: E402
from tests.conftest import make_team  # noqa: E402
from tests.server import Server  # noqa: E402


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


async def send_rate(
    url: str, token: str, seconds: float, in_flight: int, transport: str, keys: bool
) -> dict[str, float]:
    """`in_flight` sends kept going from one AsyncClient for `seconds`."""
    latencies: list[float] = []
    async with AsyncClient(
        url,
        token=token,
        max_connections=in_flight,
        transport=transport,  # type: ignore[arg-type]
        idempotency_keys=keys,
    ) as sender:
        deadline = time.perf_counter() + seconds

        async def loop() -> None:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                await sender.send_message(
                    sender_agent_id="sender",
                    recipient_agent_ids=["receiver"],
                    message_type="information",
                    content={"text": "bench"},
                )
                latencies.append(time.perf_counter() - started)

        began = time.perf_counter()
        await asyncio.gather(*(loop() for _ in range(in_flight)))
        took = time.perf_counter() - began
    return {
        "sent_per_s": len(latencies) / took,
        "p50_ms": percentile(latencies, 0.5) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }


async def push_latency(url: str, sender_token: str, receiver_token: str, count: int) -> dict[str, float]:
    """One message every 10 ms; for each, its send's answer → its frame at the listener."""
    answered: dict[str, float] = {}
    arrived: dict[str, float] = {}
    async with (
        AsyncClient(url, token=sender_token) as sender,
        AsyncClient(url, token=receiver_token) as receiver,
    ):
        listener = receiver.listen()
        await listener.receive(timeout=0.5)  # connected and caught up

        async def listen() -> None:
            while len(arrived) < count:
                frame = await listener.receive(timeout=10)
                if frame is None:
                    return
                if frame.message is not None:
                    arrived[frame.message.message_id] = time.perf_counter()

        reading = asyncio.create_task(listen())
        for _ in range(count):
            sent = await sender.send_message(
                sender_agent_id="sender",
                recipient_agent_ids=["listener"],
                message_type="information",
                content={"text": "push"},
            )
            answered[sent.message_id] = time.perf_counter()
            await asyncio.sleep(0.01)
        await reading
        await listener.close()
    gaps = [max(0.0, arrived[m] - answered[m]) * 1000 for m in answered if m in arrived]
    return {
        "pushed": len(gaps),
        "p50_ms": statistics.median(gaps) if gaps else 0.0,
        "p99_ms": percentile(gaps, 0.99),
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--in-flight", type=int, default=64)
    args = parser.parse_args()
    import os

    os.environ["SWITCHBOARD_BIN"] = args.binary
    with tempfile.TemporaryDirectory() as folder:
        server = Server(Path(folder))
        server.start()
        try:
            team = make_team(
                server.url,
                {
                    "sender": ("Sender", ["bench"]),
                    "receiver": ("Receiver", ["bench"]),
                    "listener": ("Listener", ["bench"]),
                },
            )
            sends = {
                f"{transport}{'' if keys else ' no keys'}": await send_rate(
                    server.url, team.tokens["sender"], args.duration, args.in_flight, transport, keys
                )
                for transport in ("http", "websocket")
                for keys in (True, False)
            }
            push = await push_latency(
                server.url, team.tokens["sender"], team.tokens["listener"], int(args.duration * 100)
            )
        finally:
            server.stop()
    print(json.dumps({"send": sends, "push": push}))


if __name__ == "__main__":
    asyncio.run(main())
