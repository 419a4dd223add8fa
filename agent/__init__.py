"""The orchestrator: configuration, the plan state machine and its steps, LLM access, evaluation, CLI, service."""
from ragsieve.agent.config import Config
from ragsieve.agent.orchestrator import Answer, Orchestrator

__all__ = ["Answer", "Config", "Orchestrator"]
