"""ragsieve: an agentic retrieval orchestrator. The public API, re-exported.

The import packages map repository folders (setuptools `package-dir`):
`ragsieve.agent` is `agent/` (plans, steps, LLM access, evaluation, CLI, service),
`ragsieve.tools` is `tools/` (ingestion, the index, statistical filters) and
`ragsieve.prompts` is `prompts/` (the Jinja templates).
"""
from ragsieve.agent import Answer, Config, Orchestrator

__all__ = ["Answer", "Config", "Orchestrator"]
