"""Switchboard's tools as an Agno toolkit (`pip install 'switchboard-client[agno]'`).

agent = Agent(model=..., tools=[SwitchboardTools(Client(url, token=token), "planner")])
"""

from __future__ import annotations

from agno.tools import Toolkit

from ..client import Client
from ._tools import AgentTools


class SwitchboardTools(Toolkit):
    """The five tools of `AgentTools`, for the agent `agent_id` the client's token is."""

    def __init__(self, client: Client, agent_id: str) -> None:
        self.switchboard = AgentTools(client, agent_id)
        super().__init__(name="switchboard", tools=self.switchboard.tools())
