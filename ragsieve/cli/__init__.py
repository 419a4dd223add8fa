"""The `ragsieve` command line: one module per command."""

from ragsieve.cli.main import main

__all__ = ["main"]
