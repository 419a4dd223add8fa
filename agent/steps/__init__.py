"""Agent steps; importing this package registers every step."""
from agent.steps import answer, retrieve

__all__ = ["answer", "retrieve"]
