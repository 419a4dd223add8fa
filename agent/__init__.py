"""ragsieve agent: plans, steps, LLM client, CLI."""
from agent.config import Config
from agent.orchestrator import Answer, Orchestrator

__all__ = ["Answer", "Config", "Orchestrator"]
