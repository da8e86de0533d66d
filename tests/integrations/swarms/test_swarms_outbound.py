"""swarms' copies elsewhere (autosave, save, exports) and its telemetry: swarms' under the default
policy, refused under any other, naming the policy, the feature and the fix."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from swarms.agents.context_compressor import ContextCompressor as SwarmsContextCompressor
from swarms_helpers import SWARMS_WARNINGS

from governed_memory import ConfigurationError
from governed_memory.integrations.swarms import GovernedContextCompressor

pytestmark = pytest.mark.filterwarnings(SWARMS_WARNINGS)


def test_governance_none_under_a_configured_policy_is_refused(
    regulated: Path, make_agent: Callable[..., Any]
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        make_agent(subject_id="cust-42", governance=None)
    assert "GOVERNED_MEMORY_POLICY=regulated" in str(caught.value)
    assert "leave governance= out" in str(caught.value)
    assert not (regulated / "agents").exists()


def test_autosave_is_refused_at_construction(
    regulated: Path, make_agent: Callable[..., Any]
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        make_agent(subject_id="cust-42", autosave=True)
    message = str(caught.value)
    assert message.startswith("Agent(autosave=True) refused under policy 'regulated' v1")
    assert "plaintext JSON (its task, the messages" in message and "leave autosave off" in message


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda a, tmp: a.save(), id="Agent.save"),
        pytest.param(lambda a, tmp: a.load(str(tmp / "state.json")), id="Agent.load"),
        pytest.param(lambda a, tmp: a.save_to_yaml(str(tmp / "a.yaml")), id="Agent.save_to_yaml"),
        pytest.param(lambda a, tmp: a.model_dump_json(), id="Agent.model_dump_json"),
        pytest.param(lambda a, tmp: a.model_dump_yaml(), id="Agent.model_dump_yaml"),
        pytest.param(lambda a, tmp: a.short_memory.save_as_json(), id="save_as_json"),
        pytest.param(lambda a, tmp: a.short_memory.save_as_yaml(), id="save_as_yaml"),
        pytest.param(lambda a, tmp: a.short_memory.export(), id="export"),
        pytest.param(
            lambda a, tmp: a.short_memory.export_conversation(str(tmp / "c.json")),
            id="export_conversation",
        ),
        pytest.param(
            lambda a, tmp: a.short_memory.load(str(tmp / "c.json")), id="Conversation.load"
        ),
    ],
)
def test_swarms_copies_are_refused_under_the_policy(
    regulated: Path, make_agent: Callable[..., Any], tmp_path: Path, call: Callable[..., Any]
) -> None:
    agent = make_agent(subject_id="cust-42")
    agent.short_memory.add("Human", "secret words")
    before = sorted(p for p in tmp_path.rglob("*") if ".governed_memory" not in p.parts)
    with pytest.raises(ConfigurationError, match=r"refused under policy 'regulated' v1 \("):
        call(agent, tmp_path)
    assert sorted(p for p in tmp_path.rglob("*") if ".governed_memory" not in p.parts) == before


def test_publishing_the_memory_to_the_marketplace_is_refused(
    regulated: Path, make_agent: Callable[..., Any]
) -> None:
    """swarms publishes short_memory.get_str() (the preloaded memory included) as the prompt."""
    with pytest.raises(ConfigurationError, match=r"publish_to_marketplace=True\) refused"):
        make_agent(subject_id="cust-42", publish_to_marketplace=True, use_cases=[])
    agent = make_agent(subject_id="cust-42")
    with pytest.raises(ConfigurationError, match="Swarms Marketplace"):
        agent.handle_publish_to_marketplace()


def test_telemetry_on_is_refused_before_swarms_builds_anything(
    regulated: Path, make_agent: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SWARMS_TELEMETRY_ON")  # swarms' default: on
    with pytest.raises(ConfigurationError) as caught:
        make_agent(subject_id="cust-42")
    message = str(caught.value)
    assert "swarms telemetry refused under policy 'regulated'" in message
    assert "SWARMS_TELEMETRY_ON=false" in message and "telemetry.swarms.world" in message
    from swarms.telemetry.otel import swarm_telemetry

    assert not swarm_telemetry().ready, "never started in this process"


def test_a_run_is_refused_if_telemetry_was_turned_on_since(
    regulated: Path, make_agent: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = make_agent(subject_id="cust-42")
    monkeypatch.setenv("SWARMS_TELEMETRY_ON", "true")
    with pytest.raises(ConfigurationError, match="swarms telemetry refused"):
        agent.run("hello")
    assert "hello" not in agent.short_memory.get_str()


def test_swarms_compressor_assigned_after_construction_is_governed(
    regulated: Path, make_agent: Callable[..., Any]
) -> None:
    """swarms' docs tune the compressor by assigning one; it keeps its settings and the policy."""
    agent = make_agent(subject_id="cust-42")
    agent._context_compressor = SwarmsContextCompressor(threshold=0.75, summarizer_model="m")
    assert isinstance(agent._context_compressor, GovernedContextCompressor)
    assert agent._context_compressor.threshold == 0.75
    assert agent._context_compressor.summarizer_model == "m"


def test_another_compressor_is_refused_under_the_policy(
    regulated: Path, make_agent: Callable[..., Any]
) -> None:
    class Mine(SwarmsContextCompressor):  # type: ignore[misc]
        pass

    agent = make_agent(subject_id="cust-42")
    with pytest.raises(ConfigurationError, match="the compressor Mine refused"):
        agent._context_compressor = Mine()
    agent._context_compressor = None  # turning compression off is allowed
    assert agent._context_compressor is None


def test_a_plain_swarms_conversation_cannot_replace_the_memory(
    regulated: Path, make_agent: Callable[..., Any]
) -> None:
    from swarms.structs.conversation import Conversation

    agent = make_agent(subject_id="cust-42")
    with pytest.raises(ConfigurationError, match=r"short_memory = Conversation\(\.\.\.\) refused"):
        agent.short_memory = Conversation(name="plain")
    agent.short_memory = agent.short_memory_init()  # as swarms' reset() does


def test_default_policy_keeps_swarms_save(make_agent: Callable[..., Any], workspace: Path) -> None:
    agent = make_agent(messages=[{"role": "user", "content": "plain words"}])
    target = workspace / "state.json"
    agent.save(str(target))
    assert json.loads(target.read_text())["messages"][0]["content"] == "plain words"
    agent.short_memory.export_conversation(str(workspace / "c.json"))
    assert "plain words" in (workspace / "c.json").read_text()


def test_default_policy_keeps_swarms_conversation_autosave(stub: Any, workspace: Path) -> None:
    from governed_memory.integrations.swarms import GovernedConversation

    conversation = GovernedConversation(
        name="c", autosave=True, conversations_dir=str(workspace / "conversations")
    )
    conversation.add("Human", "plain words")
    assert "plain words" in (workspace / "conversations" / "conversation_c.json").read_text()
