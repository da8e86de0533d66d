"""The worked example of docs/integrations.md ("swarms") runs, and does what its text says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from swarms_helpers import SWARMS_WARNINGS, all_bytes

from governed_memory._cli import main

pytestmark = pytest.mark.filterwarnings(SWARMS_WARNINGS)

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations.md"


def test_the_worked_example_governs_a_swarms_agent(regulated: Path, stub: Any) -> None:
    stub.queue("Transfer set up.")
    text = DOC.read_text(encoding="utf-8")
    example = re.search(r"<!-- example: swarms -->\n```python\n(.*?)```", text, re.S)
    assert example, "docs/integrations.md has no swarms example"
    namespace: dict[str, Any] = {}
    exec(compile(example.group(1), str(DOC), "exec"), namespace)
    agent = namespace["agent"]
    sent = stub.requests[0]
    assert sent["model"] == "gpt-4o-mini"
    assert sent["messages"][-1]["content"].startswith("My IBAN is DE89")
    assert b"DE89" not in all_bytes(regulated), "no plaintext anywhere in the workspace"
    folder = regulated / "agents" / "Teller"
    assert (folder / "MEMORY.md.gmenc").exists() and not (folder / "MEMORY.md").exists()
    assert agent.short_memory.subject_id == "cust-7"
    result = CliRunner().invoke(main, ["audit", "verify"])
    assert result.exit_code == 0 and result.output.startswith("OK:"), result.output
