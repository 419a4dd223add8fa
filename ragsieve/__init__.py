"""ragsieve: an agentic retrieval orchestrator. The public API, re-exported.

The import packages map repository folders (setuptools `package-dir`):
`ragsieve` is `ragsieve/`: this façade and the front ends (`cli`, `service` with the documents API,
MCP and web page, `eval`, `insights`); `python -m ragsieve` is the `ragsieve` command.
`ragsieve.agent` is `agent/` (the orchestrator, plans, steps, judging, LLM access, answers),
`ragsieve.tools` is `tools/` (ingestion, the index, statistical filters, datasets) and
`ragsieve.prompts` is `prompts/` (the Jinja templates).
"""

from ragsieve.agent import Answer, Config, Orchestrator

__all__ = ["Answer", "Config", "Orchestrator"]
