"""Each Conversation method and attribute swarms 16.0.3's Agent (and the modules it delegates to) uses.

The list is docs/integrations.md's. Each is run on swarms' own Conversation and on ours, built as
swarms' ``Agent.short_memory_init`` builds it, over MEMORY.md files in two workspaces: the
results, the histories and the files must be the same (timestamps and message ids aside).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from swarms.structs.conversation import Conversation as SwarmsConversation
from swarms_helpers import normalise

from governed_memory.integrations.swarms import GovernedConversation

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations.md"

TOOL_CALL = [{"id": "call_1", "function": {"name": "price", "arguments": '{"t": "SPY"}'}}]


def build(cls: type[Any], workspace: Path) -> Any:
    """As ``Agent.short_memory_init`` builds it (swarms 16.0.3)."""
    return cls(
        name="Quant_id_fixed_conversation",
        system_prompt="You are a quant.",
        user="Human",
        rules="Be precise.",
        token_count=False,
        message_id_on=True,
        time_enabled=True,
        dynamic_context_window=True,
        tokenizer_model_name="gpt-4o-mini",
        context_length=16000,
        memory_md_path=str(workspace / "agents" / "Quant" / "MEMORY.md"),
        messages=None,
    )


def turns(c: Any) -> None:
    c.add("Human", "What is the Sharpe ratio of SPY?")
    c.add("Quant", "Roughly 0.45.")


def tools(c: Any) -> Any:
    calls = c.record_assistant(TOOL_CALL, "Quant")
    c.flush_tool_results(calls, {"call_1": {"price": 471.2}})
    return calls


def tool_results(c: Any) -> Any:
    results: dict[str, Any] = {}
    c.map_batch_results(TOOL_CALL, ["471.2"], results)
    return results


def unpersisted(c: Any) -> Any:
    c.memory_md_path = None
    c.add("Human", "not written")
    return c.memory_md_path


# (name, what the Agent does with it); the names are the list in docs/integrations.md.
USES: list[tuple[str, Callable[[Any], Any]]] = [
    ("add", lambda c: c.add("Human", {"ticker": "SPY"})),
    ("add_messages", lambda c: c.add_messages([{"role": "user", "content": "hi", "name": "bob"}])),
    ("conversation_history", lambda c: (turns(c), c.conversation_history)[1]),
    ("delete", lambda c: (turns(c), c.delete(-1), c.conversation_history)[2]),
    ("record_assistant", lambda c: c.record_assistant("Roughly 0.45.", "Quant")),
    ("flush_tool_results", lambda c: (tools(c), c.conversation_history)[1]),
    ("map_batch_results", tool_results),
    ("to_messages", lambda c: (turns(c), tools(c), c.to_messages("Quant", 0, ()))[2]),
    ("return_history_as_string", lambda c: (turns(c), c.return_history_as_string())[1]),
    ("get_str", lambda c: (turns(c), c.get_str())[1]),
    ("count_history_tokens", lambda c: (turns(c), c.count_history_tokens())[1]),
    ("compact", lambda c: (turns(c), c.compact("SPY: 0.45.", "user"), c.conversation_history)[2]),
    ("memory_md_path", unpersisted),
    ("return_messages_as_dictionary", lambda c: (turns(c), c.return_messages_as_dictionary())[1]),
    ("return_messages_as_list", lambda c: (turns(c), c.return_messages_as_list())[1]),
    ("to_dict", lambda c: (turns(c), c.to_dict())[1]),
    ("to_json", lambda c: (turns(c), c.to_json())[1]),
    ("get_final_message_content", lambda c: (turns(c), c.get_final_message_content())[1]),
    ("return_all_except_first", lambda c: (turns(c), c.return_all_except_first())[1]),
    (
        "return_all_except_first_string",
        lambda c: (turns(c), c.return_all_except_first_string())[1],
    ),
    ("return_list_final", lambda c: (turns(c), c.return_list_final())[1]),
    ("return_dict_final", lambda c: (turns(c), c.return_dict_final())[1]),
]


def observed(cls: type[Any], workspace: Path, use: Callable[[Any], Any]) -> tuple[str, ...]:
    conversation = build(cls, workspace)
    result = use(conversation)
    memory = workspace / "agents" / "Quant" / "MEMORY.md"
    files = sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*") if p.is_file())
    return tuple(
        normalise(text)
        for text in (
            json.dumps(result, default=str),
            json.dumps(conversation.conversation_history, default=str),
            memory.read_text(encoding="utf-8"),
            json.dumps(files),
        )
    )


@pytest.mark.parametrize(("name", "use"), USES, ids=[name for name, _ in USES])
def test_the_agent_gets_swarms_behaviour(
    name: str, use: Callable[[Any], Any], tmp_path: Path
) -> None:
    plain = observed(SwarmsConversation, tmp_path / "plain", use)
    ours = observed(GovernedConversation, tmp_path / "ours", use)
    assert ours == plain


def test_every_use_is_listed_in_the_docs() -> None:
    section = DOC.read_text(encoding="utf-8").split("## swarms", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(\w+)`", section, re.M))
    assert listed == {name for name, _ in USES}
