"""Governed memory for ``swarms.Agent`` (swarms 16.0.3): change one import.

.. code-block:: python

    from governed_memory.integrations.swarms import Agent  # was: from swarms import Agent

    agent = Agent(agent_name="Teller", persistent_memory=True, subject_id="cust-42")

The agent keeps swarms' whole behaviour; its MEMORY.md (write-through,
preload, compaction by swarms' ContextCompressor, archives) runs under the
configured policy: consent, encryption at rest, subject isolation, audit,
retention, export and erasure. docs/integrations.md ("swarms") is the guide.

Modules: ``_agent`` (the Agent), ``_conversation`` (its short memory),
``_compressor`` (its compressor), ``_outbound`` (what a policy says about
swarms' autosave, exports and telemetry).

Requires the extra: ``pip install 'governed-memory[swarms]'``.
"""

from __future__ import annotations

from ._agent import Agent
from ._compressor import GovernedContextCompressor
from ._conversation import GovernedConversation

__all__ = ["Agent", "GovernedContextCompressor", "GovernedConversation"]
