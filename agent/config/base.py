"""What every settings section shares: unknown keys refused, modes checked against their Enum."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from ragsieve.tools.modes import parse_enum


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=False)


def _mode(enum_cls: type[Enum], what: str) -> Any:
    """A validator refusing a mode string outside `enum_cls`, listing the valid values."""
    return field_validator(what)(classmethod(lambda cls, v: parse_enum(enum_cls, v, what).value))
