"""The `ragsieve` command line: one module per command."""
from ragsieve.agent.cli.main import main

__all__ = ["main"]
