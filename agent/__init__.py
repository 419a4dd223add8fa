"""The orchestrator: configuration, the plan state machine and its steps, judging, LLM access, calibration, answers."""

from ragsieve.agent.config import Config
from ragsieve.agent.orchestrator import Orchestrator
from ragsieve.agent.reply import Answer

__all__ = ["Answer", "Config", "Orchestrator"]
