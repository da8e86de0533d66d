"""Review of the swarms adapter under policies/regulated.toml: paths swarms offers around the gate."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from swarms_helpers import CANARY, SWARMS_WARNINGS, consented

from governed_memory import ConfigurationError, erase

pytestmark = pytest.mark.filterwarnings(SWARMS_WARNINGS)


@pytest.mark.parametrize("loader", ["load_from_json", "load_from_yaml", "import_conversation"])
def test_swarms_loaders_other_than_load_are_refused_and_change_nothing(
    regulated: Path, make_agent: Callable[..., Any], tmp_path: Path, loader: str
) -> None:
    # swarms' loaders set every attribute the file's metadata names: here the gate and autosave.
    saved = tmp_path / "saved.json"
    saved.write_text(
        json.dumps(
            {
                "metadata": {"_gate": None, "autosave": True},
                "conversation_history": [{"role": "Human", "content": CANARY}],
            }
        )
    )
    memory = make_agent(subject_id="cust-42").short_memory
    with pytest.raises(ConfigurationError) as caught:
        getattr(memory, loader)(str(saved))
    assert f"Conversation.{loader}(" in str(caught.value) and "'regulated'" in str(caught.value)
    assert memory.governance is not None and memory.autosave is False
    assert CANARY not in memory.get_str()


@pytest.mark.parametrize(
    "read",
    [
        "to_dict",
        "to_json",
        "to_yaml",
        "get_final_message_content",
        "return_dict_final",
        "return_messages_as_strings",
        "get_last_message_as_string",
        "dynamic_auto_chunking",
    ],
)
def test_every_read_of_the_live_history_leaves_an_erased_subject_out(
    regulated: Path, make_agent: Callable[..., Any], read: str
) -> None:
    memory = consented(make_agent(subject_id="cust-42"), "persist").short_memory
    memory.add("Human", f"My {CANARY}.")
    erase(memory.governance, subject="cust-42", reason="Art. 17 request")
    assert CANARY not in str(getattr(memory, read)())


def test_messages_batch_added_are_the_subjects_and_leave_with_its_erasure(
    regulated: Path, make_agent: Callable[..., Any]
) -> None:
    memory = consented(make_agent(subject_id="cust-42"), "persist").short_memory
    memory.batch_add([{"role": "Human", "content": f"My {CANARY}."}])  # swarms: memory only
    erase(memory.governance, subject="cust-42", reason="Art. 17 request")
    assert CANARY not in memory.get_str()


def test_the_seed_messages_of_one_subject_are_not_written_to_the_next_subjects_memory(
    regulated: Path, make_agent: Callable[..., Any]
) -> None:
    seed = [{"role": "user", "content": f"Earlier: my {CANARY}."}]
    agent = consented(make_agent(subject_id="cust-42", messages=seed), "persist")
    agent.governance.grant("cust-7", "persist", actor="test")
    with pytest.raises(ConfigurationError) as caught:
        agent.subject_id = "cust-7"
    assert "messages=" in str(caught.value) and "agent.messages = None" in str(caught.value)
    assert agent.subject_id == "cust-42"
    agent.messages = None  # the fix the error names
    agent.subject_id = "cust-7"
    assert CANARY not in agent.short_memory.get_str()


def test_swarms_log_files_on_are_refused_naming_the_variable(
    regulated: Path, make_agent: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # swarms then logs at INFO to $WORKSPACE_DIR/logs: add_memory() logs the memory it adds.
    monkeypatch.setenv("SWARMS_LOG_FILES", "true")
    with pytest.raises(ConfigurationError) as caught:
        make_agent(subject_id="cust-42")
    message = str(caught.value)
    assert "swarms log files refused under policy 'regulated'" in message
    assert "SWARMS_LOG_FILES=false" in message
    assert not (regulated / "agents").exists()


def test_a_memory_path_outside_the_workspace_is_refused_where_erasure_would_not_reach(
    regulated: Path, make_agent: Callable[..., Any], tmp_path: Path
) -> None:
    memory = consented(make_agent(subject_id="cust-42"), "persist").short_memory
    elsewhere = tmp_path / "elsewhere" / "MEMORY.md"
    with pytest.raises(ConfigurationError) as caught:
        memory.memory_md_path = str(elsewhere)
    assert "memory_md_path" in str(caught.value) and str(regulated / "agents") in str(caught.value)
    memory.add("Human", f"My {CANARY}.")
    assert not (tmp_path / "elsewhere").exists()
    assert memory.memory_md_path == str(regulated / "agents" / "Quant" / "MEMORY.md")
