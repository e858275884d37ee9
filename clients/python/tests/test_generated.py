"""The package cannot drift from the server: its types and methods are what the generator
makes from the committed OpenAPI document, and its version is the server's."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import switchboard_client

from .server import ROOT

CLIENT = ROOT / "clients" / "python"


def load_generator() -> object:
    spec = importlib.util.spec_from_file_location("generate", CLIENT / "tools" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["generate"] = module
    spec.loader.exec_module(module)
    return module


def test_generated_files_match_the_openapi_document() -> None:
    generator = load_generator()
    outputs: dict[Path, str] = generator.generate()  # type: ignore[attr-defined]
    assert len(outputs) == 2
    for path, text in outputs.items():
        assert path.read_text() == text, (
            f"{path.name} is stale: run `python clients/python/tools/generate.py`"
        )


def test_every_rest_operation_has_a_method() -> None:
    """A new REST operation is a new method (or a decision, named here, that it is not)."""
    import json

    spec = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    generator = load_generator()
    covered = {operation_id for _, operation_id, _ in generator.OPERATIONS}  # type: ignore[attr-defined]
    # Not JSON calls: the Prometheus text, the readiness probe, and the two upgrades
    # (`listen()` is the WebSocket hub; STOMP has stomp.py).
    elsewhere = {"metrics_text", "readyz", "connect", "stomp_over_websocket"}
    every = {
        op["operationId"]
        for verbs in spec["paths"].values()
        for op in verbs.values()
        if isinstance(op, dict) and "operationId" in op
    }
    assert every - covered - elsewhere == set()


def test_version_is_the_servers() -> None:
    cargo = (ROOT / "Cargo.toml").read_text()
    server = re.search(r'(?m)^version = "([^"]+)"', cargo)
    project = re.search(r'(?m)^version = "([^"]+)"', (CLIENT / "pyproject.toml").read_text())
    assert server is not None and project is not None
    assert project.group(1) == server.group(1) == switchboard_client.__version__
