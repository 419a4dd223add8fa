"""`python -m ragsieve`: the same as the `ragsieve` command."""

import sys

from ragsieve.cli.main import main

sys.exit(main())
