from __future__ import annotations

from .conftest import Team


def test_send_and_read(team: Team) -> None:
    with team.client("planner") as planner, team.client("coder") as coder:
        sent = planner.send_message(
            sender_agent_id="planner",
            recipient_agent_ids=["coder"],
            message_type="request",
            content={"text": "Review the parser", "data": {"pr": 42}},
            requires_response=True,
        )
        assert sent.success and sent.message_id.startswith("msg_")
        page = coder.get_messages(unread_only=True)
        assert [m.message_id for m in page.messages] == [sent.message_id]
        assert page.messages[0].content.data == {"pr": 42}
