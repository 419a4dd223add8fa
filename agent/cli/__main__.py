"""`python -m ragsieve.agent.cli`: the same as the `ragsieve` command."""
import sys

from ragsieve.agent.cli.main import main

sys.exit(main())
