"""Memory: Conversation, ContextCompressor, Agent, tools, summarizers, read-only inspection.

For the CLI (a documented internal name): ``SUMMARY_PREFIX``, the prefix
ContextCompressor writes, which the demo's compaction uses too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base import lazy_attributes

# Names other layers use, imported on first use (PEP 562) so that importing this
# package loads none of its modules until one is needed.
if TYPE_CHECKING:
    from ._agent import Agent
    from ._compressor import SUMMARY_PREFIX, Backoff, ContextCompressor
    from ._conversation import Conversation
    from ._erasures import filter_history
    from ._inspect import (
        AgentInfo,
        StoredRecord,
        agent_info,
        agent_names,
        agent_records,
        list_agents,
    )
    from ._summarizers import ExtractiveSummarizer, LiteLLMSummarizer, Summarizer, Transcript

_LAZY: dict[str, str] = {
    "Agent": "._agent",
    "Backoff": "._compressor",
    "ContextCompressor": "._compressor",
    "SUMMARY_PREFIX": "._compressor",
    "Conversation": "._conversation",
    "filter_history": "._erasures",
    "AgentInfo": "._inspect",
    "StoredRecord": "._inspect",
    "agent_info": "._inspect",
    "agent_names": "._inspect",
    "agent_records": "._inspect",
    "list_agents": "._inspect",
    "ExtractiveSummarizer": "._summarizers",
    "LiteLLMSummarizer": "._summarizers",
    "Summarizer": "._summarizers",
    "Transcript": "._summarizers",
}

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "SUMMARY_PREFIX",
    "Agent",
    "AgentInfo",
    "Backoff",
    "ContextCompressor",
    "Conversation",
    "ExtractiveSummarizer",
    "LiteLLMSummarizer",
    "StoredRecord",
    "Summarizer",
    "Transcript",
    "agent_info",
    "agent_names",
    "agent_records",
    "filter_history",
    "list_agents",
]
