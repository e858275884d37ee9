"""Switchboard's tools as CrewAI tools (`pip install 'switchboard-client[crewai]'`).

agent = Agent(role=..., goal=..., backstory=..., llm=...,
              tools=switchboard_tools(Client(url, token=token), "planner"))
"""

from __future__ import annotations

from typing import Any

from crewai.tools import tool

from ..client import Client
from ._tools import AgentTools


def switchboard_tools(client: Client, agent_id: str) -> list[Any]:
    """The five tools of `AgentTools`, for the agent `agent_id` the client's token is."""
    return [tool(function) for function in AgentTools(client, agent_id).tools()]
