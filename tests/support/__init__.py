"""Helpers shared by the tests: fakes, fixtures, servers on loopback (no tests here)."""
