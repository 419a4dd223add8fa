"""Test doubles for ragsieve and its extensions: the scripted chat model (`FakeChat`); the backend contract
tests are in `ragsieve.testing.backends` (they need pytest)."""

from ragsieve.testing.fake_chat import FakeChat, Scripted

__all__ = ["FakeChat", "Scripted"]
