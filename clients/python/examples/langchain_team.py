"""A two-agent team with LangChain: the planner is a LangChain tool-calling loop over
Switchboard's tools (`switchboard_client.toolkits.langchain`), its model a scripted
stand-in; the coder is a `Worker`. Run after the README's walkthrough:

    python clients/python/examples/langchain_team.py
"""

from __future__ import annotations

import os
import time
from typing import Any

from _team import URL, Script, coder
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from switchboard_client import Client
from switchboard_client.toolkits.langchain import switchboard_tools


class ScriptedModel(BaseChatModel):
    """A chat model whose turns come from `Script` instead of a language model."""

    script: Any = None

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        last = messages[-1]
        turn = self.script.next_call(str(last.content) if isinstance(last, ToolMessage) else None)
        if isinstance(turn, str):
            reply = AIMessage(content=turn)
        else:
            name, arguments = turn
            reply = AIMessage(
                content="", tool_calls=[{"name": name, "args": arguments, "id": name}]
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def main() -> None:
    with coder(), Client(URL, token=os.environ["PLANNER_TOKEN"]) as client:
        tools = {tool.name: tool for tool in switchboard_tools(client, "planner")}
        model = ScriptedModel(script=Script())
        messages: list[BaseMessage] = [HumanMessage("Have the coder count some words.")]
        while True:
            reply = model.invoke(messages)
            messages.append(reply)
            if not isinstance(reply, AIMessage) or not reply.tool_calls:
                break
            for call in reply.tool_calls:
                messages.append(tools[call["name"]].invoke(call))
            time.sleep(0.05)
        print(reply.content)


if __name__ == "__main__":
    main()
