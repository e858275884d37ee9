"""A two-agent team with Agno: the planner is an Agno `Agent` with Switchboard's toolkit
(`switchboard_client.toolkits.agno`), its model a scripted stand-in that Agno drives as it
would a language model (Agno runs each tool call and hands the answer back); the coder
is a `Worker`. Run after the README's walkthrough:

    python clients/python/examples/agno_team.py
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from _team import URL, Script, coder
from agno.agent import Agent
from agno.models.base import Model
from agno.models.response import ModelResponse

from switchboard_client import Client
from switchboard_client.toolkits.agno import SwitchboardTools


@dataclass
class ScriptedModel(Model):
    """An Agno model whose turns come from `Script` instead of a language model."""

    id: str = "scripted"
    name: str = "Scripted"
    provider: str = "none"
    script: Script = field(default_factory=Script)

    def invoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        messages = kwargs.get("messages") or (args[0] if args else [])
        last = messages[-1] if messages else None
        tool_answer = str(last.content) if last is not None and last.role == "tool" else None
        turn = self.script.next_call(tool_answer)
        if isinstance(turn, str):
            return ModelResponse(role="assistant", content=turn)
        name, arguments = turn
        call = {
            "id": name,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        return ModelResponse(role="assistant", tool_calls=[call])

    async def ainvoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return self.invoke(*args, **kwargs)

    def invoke_stream(self, *args: Any, **kwargs: Any) -> Iterator[ModelResponse]:
        yield self.invoke(*args, **kwargs)

    async def ainvoke_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ModelResponse]:
        yield self.invoke(*args, **kwargs)

    def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]


def main() -> None:
    with coder(), Client(URL, token=os.environ["PLANNER_TOKEN"]) as client:
        planner = Agent(
            name="planner",
            model=ScriptedModel(),
            tools=[SwitchboardTools(client, "planner")],
            tool_call_limit=100,
        )
        run = planner.run("Have the coder count some words.")
        print(run.content)


if __name__ == "__main__":
    main()
