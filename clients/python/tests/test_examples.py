"""The toolkits' examples: each a two-agent team that works without a model, run as a
user runs it (a process of its own, the walkthrough's variables in its environment)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import Team
from .server import ROOT

EXAMPLES = ROOT / "clients" / "python" / "examples"


def run_example(team: Team, name: str, python: str = sys.executable) -> str:
    env = {
        **os.environ,
        "SB": team.url,
        "PLANNER_TOKEN": team.tokens["planner"],
        "CODER_TOKEN": team.tokens["coder"],
    }
    done = subprocess.run(
        [python, str(EXAMPLES / name)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def crewai_python() -> str:
    """CrewAI's pins conflict with the other frameworks': it has a virtualenv of its own
    (`target/pyenv-crewai`), which the Rust test that runs this suite names."""
    python = os.environ.get("SWITCHBOARD_CREWAI_PYTHON")
    if python is None:
        pytest.skip("SWITCHBOARD_CREWAI_PYTHON names no interpreter with CrewAI")
    return python


@pytest.mark.parametrize("example", ["langchain_team.py", "agno_team.py", "crewai_team.py"])
def test_toolkit_example(team: Team, example: str) -> None:
    python = crewai_python() if example.startswith("crewai") else sys.executable
    assert run_example(team, example, python) == "The coder counted 6 words."
    with team.client("planner") as planner:
        (task,) = planner.list_tasks(role="originated").tasks
    assert (task.status, task.assignee_agent_id, task.result_data) == (
        "success",
        "coder",
        {"words": 6},
    )
