"""The five tools every toolkit wraps, as plain typed functions on one agent's client."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from .. import errors
from ..client import Client


def _text(value: Any) -> str:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return json.dumps(value, default=str)


def _refusal(error: errors.SwitchboardError) -> str:
    return _text(
        {
            "success": False,
            "error_code": error.error_code,
            "error_message": error.error_message,
            "details": error.details,
            "suggested_action": error.suggested_action,
        }
    )


class AgentTools:
    """One agent's tools: each method is a tool (its docstring is the description a model
    reads, its parameters the tool's arguments)."""

    def __init__(self, client: Client, agent_id: str) -> None:
        self.client = client
        self.agent_id = agent_id

    def tools(self) -> list[Callable[..., str]]:
        return [
            self.send_message,
            self.read_inbox,
            self.request_assistance,
            self.submit_task,
            self.get_task,
        ]

    def _answer(self, call: Callable[[], Any]) -> str:
        try:
            return _text(call())
        except errors.SwitchboardError as refused:
            return _refusal(refused)

    def send_message(
        self, recipient_agent_ids: list[str], text: str, message_type: str = "information"
    ) -> str:
        """Send a message to team members by agent id. message_type is one of
        information, request, response, coordination."""
        return self._answer(
            lambda: self.client.send_message(
                sender_agent_id=self.agent_id,
                recipient_agent_ids=recipient_agent_ids,
                message_type=message_type,  # type: ignore[arg-type]
                content={"text": text},
            )
        )

    def read_inbox(self, unread_only: bool = True, limit: int = 20) -> str:
        """Read this agent's inbox (newest first): each entry's sender, text and id."""

        def read() -> Any:
            page = self.client.get_messages(unread_only=unread_only, limit=limit)
            return [
                {
                    "message_id": m.message_id,
                    "from": m.sender_agent_id,
                    "kind": m.kind,
                    "text": m.content.text,
                    "data": m.content.data,
                }
                for m in page.messages
            ]

        return self._answer(read)

    def request_assistance(self, capabilities: list[str], description: str) -> str:
        """Ask the team who can help with a need: answers the members that match the
        capabilities, best first."""
        return self._answer(
            lambda: self.client.request_assistance(
                requester_agent_id=self.agent_id,
                assistance_type="expertise",
                required_capabilities=capabilities,
                request_details={"description": description},
            )
        )

    def submit_task(
        self,
        description: str,
        target_agent_id: str | None = None,
        required_capabilities: list[str] | None = None,
        data: dict[str, Any] | None = None,
        task_id: str | None = None,
    ) -> str:
        """Give the team a task: to target_agent_id, or to the best member for the
        required capabilities. Answers the task's id and status."""

        def submit() -> Any:
            submitted = self.client.submit_task(
                task_id=task_id,
                originating_agent_id=self.agent_id,
                description=description,
                target_agent_id=target_agent_id,
                required_capabilities=required_capabilities,
                data=data,
            )
            task = submitted.task
            return {
                "task_id": submitted.task_response.task_id,
                "status": submitted.task_response.status,
                "assignee_agent_id": task.assignee_agent_id if task is not None else None,
            }

        return self._answer(submit)

    def get_task(self, task_id: str) -> str:
        """Follow a task: its status, assignee, open question and result."""

        def read() -> Any:
            task = self.client.get_task(task_id=task_id).task
            question = task.open_clarification
            return {
                "task_id": task.task_id,
                "status": task.status,
                "assignee_agent_id": task.assignee_agent_id,
                "open_question": question.question if question is not None else None,
                "result_data": task.result_data,
            }

        return self._answer(read)
