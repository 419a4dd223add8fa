"""A markdown document's own access list: `access:` in its `---` YAML front matter.

Either inline (`access: group:finance, user:bob` or `access: [group:finance, user:bob]`) or a block list::

    ---
    title: Budget
    access:
      - group:finance
    ---
"""

from __future__ import annotations

import re

from ragsieve.tools.access.principals import principals

_FRONT = re.compile(r"\A---[ \t]*\n(.*?\n)---[ \t]*\n", re.DOTALL)
_ACCESS = re.compile(r"^access:[ \t]*(.*?)[ \t]*$((?:\n[ \t]+-[ \t]*.+$)*)", re.MULTILINE)


def front_matter_access(text: str) -> tuple[str, ...] | None:
    """The principals an `access:` key lists (None: no front matter or no such key); UsageError on a bad one."""
    m = _FRONT.match(text)
    found = _ACCESS.search(m.group(1)) if m else None
    if found is None:
        return None
    inline = found.group(1).strip().strip("[]")
    items = [i.strip().strip("'\"") for i in inline.split(",") if i.strip()]
    items += [line.strip()[1:].strip().strip("'\"") for line in found.group(2).splitlines() if line.strip()]
    return principals(items)
