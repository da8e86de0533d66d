"""Governed memory under agent frameworks users already run.

Each module is an optional extra and imports its framework on import:

* ``governed_memory.integrations.swarms`` (``pip install 'governed-memory[swarms]'``):
  a ``swarms.Agent`` whose ``MEMORY.md`` goes through the policy layer;
* ``governed_memory.integrations.openai_agents``
  (``pip install 'governed-memory[openai-agents]'``): a ``Session`` of the
  OpenAI Agents SDK over governed memory.

docs/integrations.md is the guide: the one-line change, what is governed and
what is not.
"""
