"""Principals: who a document is for and who is asking (`user:alice@example.com`, `group:finance`, `public`).

A document's access list and a caller's identity are both sets of principals; a caller may read a document
when the document is `public` or the two sets meet. Principals compare case-insensitively (an e-mail from a
proxy and one written in a rules file may differ in case), so they are kept lower-cased.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import Enum

from ragsieve.tools.errors import UsageError

PUBLIC = "public"
_NAME = re.compile(r"[^\s,;\"'<>`]{1,256}")
MAX_PRINCIPALS = 1000


class AccessDefault(str, Enum):
    """What an unlabelled document is: readable by every caller, or by none (only by unrestricted calls)."""

    PUBLIC = "public"
    DENY = "deny"


def principal(text: str) -> str:
    """One principal, checked and lower-cased; UsageError names what is accepted. Whitespace inside a group's
    name becomes `-` (an Open WebUI or directory group `Finance Team` is `group:finance-team`), so a rules file,
    whose entries are separated by spaces, can name it."""
    value = str(text).strip().lower()
    if value == PUBLIC:
        return value
    kind, sep, name = value.partition(":")
    if kind == "group":
        name = re.sub(r"\s+", "-", name.strip())
    if sep and kind in ("user", "group") and _NAME.fullmatch(name):
        return f"{kind}:{name}"
    raise UsageError(f"bad principal {str(text)[:80]!r}: use user:NAME, group:NAME or public")


def principals(items: Iterable[str] | str) -> tuple[str, ...]:
    """Principals from a list or a comma/space separated string, checked, de-duplicated, sorted."""
    if isinstance(items, str):
        items = [p for p in re.split(r"[,\s]+", items) if p]
    out = sorted({principal(p) for p in items})
    if len(out) > MAX_PRINCIPALS:
        raise UsageError(f"at most {MAX_PRINCIPALS} principals, got {len(out)}")
    return tuple(out)


def may_read(readers: Iterable[str], caller: Iterable[str]) -> bool:
    """Whether a caller holding `caller` may read a document whose access list is `readers`."""
    readers = set(readers)
    return PUBLIC in readers or not readers.isdisjoint(caller)
