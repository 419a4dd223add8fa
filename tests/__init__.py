"""The test suite, grouped by purpose (tests/README.md says how to run each group)."""
