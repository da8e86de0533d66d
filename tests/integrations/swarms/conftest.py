"""Fixtures of the swarms integration tests: a real swarms 16.0.3 Agent against StubLLM.

swarms' telemetry is off in every test (``SWARMS_TELEMETRY_ON=false``; the network
is blocked besides), and swarms' cached ``$WORKSPACE_DIR`` is cleared around each test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from swarms_helpers import MODEL

from governed_memory import LocalSigningKey, generate_audit_key, generate_master_key


@pytest.fixture(autouse=True)
def _swarms_env(monkeypatch: pytest.MonkeyPatch, workspace: Path) -> Iterator[None]:
    from swarms.utils.workspace_utils import get_workspace_dir

    monkeypatch.setenv("SWARMS_TELEMETRY_ON", "false")
    monkeypatch.setenv("WORKSPACE_DIR", str(workspace))
    get_workspace_dir.cache_clear()  # swarms caches $WORKSPACE_DIR for the process
    yield
    get_workspace_dir.cache_clear()


@pytest.fixture
def stub(stub_llm: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """StubLLM; swarms' compressor call (which takes no base URL) reaches it through the environment."""
    monkeypatch.setenv("OPENAI_API_BASE", stub_llm.url)
    monkeypatch.setenv("OPENAI_API_KEY", "stub-key")
    return stub_llm


@pytest.fixture
def make_agent(stub: Any) -> Callable[..., Any]:
    """Builds an Agent class (swarms' or ours) on the stub: persistent memory, quiet, one loop."""

    def make(cls: type[Any] | None = None, **kwargs: Any) -> Any:
        if cls is None:
            from governed_memory.integrations.swarms import Agent as cls
        options: dict[str, Any] = {
            "agent_name": "Quant",
            "model_name": MODEL,
            "llm_base_url": stub.url,
            "llm_api_key": "stub-key",
            "persistent_memory": True,
            "print_on": False,
            "max_loops": 1,
            "system_prompt": "You are a quant.",
        }
        options.update(kwargs)
        return cls(**options)

    return make


@pytest.fixture
def regulated(monkeypatch: pytest.MonkeyPatch, workspace: Path) -> Path:
    """The admin's environment for the shipped regulated policy; returns the workspace."""
    monkeypatch.setenv("GOVERNED_MEMORY_POLICY", "regulated")
    monkeypatch.setenv("GOVERNED_MEMORY_MASTER_KEY", generate_master_key())
    monkeypatch.setenv("GOVERNED_MEMORY_AUDIT_KEY", generate_audit_key())
    monkeypatch.setenv("GOVERNED_MEMORY_SIGNING_KEY", LocalSigningKey.generate().to_base64())
    return workspace
