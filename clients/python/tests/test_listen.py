"""`listen()` across dropped connections and a killed server: nothing missed, nothing
twice, in order; and the retry of a send while the server is down."""

from __future__ import annotations

import asyncio
import threading
import time

from switchboard_client import AsyncClient, Client, Frame

from .conftest import Team, make_team
from .server import Server


def send(planner: Client, n: int) -> str:
    return planner.send_message(
        sender_agent_id="planner",
        recipient_agent_ids=["coder"],
        message_type="information",
        content={"text": f"note {n}"},
    ).message_id


def test_listen_across_a_killed_server(own_server: Server) -> None:
    team = make_team(own_server.url)
    sent: list[str] = []
    with team.client("planner") as planner:
        sent += [send(planner, n) for n in range(30)]
    received: list[Frame] = []
    with team.client("coder") as coder, coder.listen() as listener:
        while len(received) < 10:
            frame = listener.receive(timeout=10)
            assert frame is not None, "the replay arrives"
            received.append(frame)
        own_server.kill()
        own_server.start()
        with team.client("planner") as planner:
            sent += [send(planner, n) for n in range(30, 60)]
        while len(received) < 60:
            frame = listener.receive(timeout=20)
            assert frame is not None, f"frame {len(received)} arrives after the restart"
            received.append(frame)
        assert listener.receive(timeout=0.5) is None, "nothing twice"
    ids = [frame.message.message_id for frame in received if frame.message is not None]
    assert ids == sent
    seqs = [frame.seq for frame in received]
    assert seqs == sorted(set(seqs))


def test_a_new_listener_resumes_after_what_the_last_one_finished(team: Team) -> None:
    """Acks: a listener acks what the caller asked past, so a new process that does not
    pass `since` starts after it."""
    with team.client("planner") as planner:
        sent = [send(planner, n) for n in range(5)]
    with team.client("coder") as coder:
        with coder.listen() as first:
            for _ in range(3):
                assert first.receive(timeout=10) is not None
            # Asking for the next frame acks the third.
            assert first.receive(timeout=10) is not None
        time.sleep(1.5)  # acks are saved within a second
        with coder.listen() as second:
            frame = second.receive(timeout=10)
    assert frame is not None and frame.message is not None
    assert frame.message.message_id == sent[3]


def test_async_listen_with_live_push(team: Team) -> None:
    async def scenario() -> list[str]:
        async with (
            AsyncClient(team.url, token=team.tokens["coder"]) as coder,
            AsyncClient(team.url, token=team.tokens["planner"]) as planner,
        ):
            listener = coder.listen()
            got: list[str] = []
            async with listener:
                assert await listener.receive(timeout=0.5) is None
                assert listener.caught_up and listener.agent_id == "coder"
                for n in range(5):
                    await planner.send_message(
                        sender_agent_id="planner",
                        recipient_agent_ids=["coder"],
                        message_type="information",
                        content={"text": f"live {n}"},
                    )
                async for frame in listener:
                    assert frame.message is not None
                    got.append(frame.message.content.text)
                    if len(got) == 5:
                        break
            return got

    assert asyncio.run(scenario()) == [f"live {n}" for n in range(5)]


def test_a_send_waits_out_a_restart(own_server: Server) -> None:
    team = make_team(own_server.url)
    own_server.kill()

    def restart() -> None:
        time.sleep(0.3)
        own_server.start()

    restarting = threading.Thread(target=restart)
    restarting.start()
    try:
        with Client(team.url, token=team.tokens["planner"], retries=8) as planner:
            message_id = send(planner, 0)
    finally:
        restarting.join()
    with team.client("coder") as coder:
        assert [m.message_id for m in coder.get_messages().messages] == [message_id]
