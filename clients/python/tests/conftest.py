"""Fixtures: one real server for the session, and a fresh team in it per test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from switchboard_client import Client

from .server import ADMIN, Server

_teams = itertools.count(1)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = Server(Path(tmp_path_factory.mktemp("server")))
    running.start()
    yield running
    running.stop()
    assert "panicked" not in running.log(), running.log()


@dataclass
class Team:
    """A team with a planner, a coder (`python` capability) and a tester, and their
    tokens."""

    url: str
    team_id: str
    team_key: str
    tokens: dict[str, str]

    def client(self, agent: str) -> Client:
        return Client(self.url, token=self.tokens[agent])


def make_team(url: str, roles: dict[str, tuple[str, list[str]]] | None = None) -> Team:
    roles = roles or {
        "planner": ("Planner", ["planning"]),
        "coder": ("Coder", ["python"]),
        "tester": ("Tester", ["testing"]),
    }
    with Client(url, token=ADMIN) as admin:
        created = admin.create_team(team_id=f"team-{next(_teams)}", name="Python client tests")
    tokens: dict[str, str] = {}
    with Client(url, token=created.team_key) as team:
        for agent_id, (role, capabilities) in roles.items():
            registered = team.register_agent(
                team_id=created.team_id, agent_id=agent_id, role=role, capabilities=capabilities
            )
            tokens[agent_id] = registered.token
    return Team(url, created.team_id, created.team_key, tokens)


@pytest.fixture
def team(server: Server) -> Team:
    return make_team(server.url)


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[Server]:
    """A server of the test's own, for a test that kills and restarts it."""
    running = Server(tmp_path)
    running.start()
    yield running
    running.stop()
    assert "panicked" not in running.log(), running.log()
