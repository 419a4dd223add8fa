"""The checks `benchmarks/service/frontends.py` makes on each reply a front end stored and showed.

A reply is ragsieve's content as the front end kept it (Open WebUI's stored chat message: `content` and
`sources`, the `url_citation` annotations it turned into sources) and the text the browser showed. Each
check returns (passed, why) so a failure in the result file says what was seen.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

SOURCES_HEADING = "**Sources**"
NOT_GROUNDED = "Not grounded in the documents"
ABSTAIN = "The context does not contain the answer."
MARK = re.compile(r"\[(\d+)\]")


@dataclass
class Reply:
    content: str  # the message as stored: the answer, then ragsieve's Sources list
    sources: list[dict] = field(default_factory=list)  # the front end's sources: {"name": ..., "url": ...}
    shown: str = ""  # the text the browser showed for it

    @property
    def body(self) -> str:
        """The answer without ragsieve's Sources list and note."""
        return self.content.split(SOURCES_HEADING, 1)[0].split(f"*{NOT_GROUNDED}", 1)[0]

    @property
    def cited(self) -> list[int]:
        """The passage numbers the answer's sentences cite, in order of first use (an abstention cites none: the
        closest passages it lists are not sources)."""
        if self.abstained:
            return []
        return list(dict.fromkeys(int(n) for n in MARK.findall(self.body)))

    @property
    def abstained(self) -> bool:
        return self.body.strip().startswith(ABSTAIN)


def answer_once(reply: Reply) -> tuple[bool, str]:
    """The answer is there once: one Sources list at most, no line of the answer repeated, and its opening
    words not sent again (a re-sent corrected answer repeats them)."""
    if reply.content.count(SOURCES_HEADING) > 1:
        return False, f"{reply.content.count(SOURCES_HEADING)} Sources lists"
    lines = [ln.strip() for ln in reply.body.splitlines() if len(ln.strip()) >= 20 and not MARK.match(ln.strip())]
    repeated = [ln for ln, n in Counter(lines).items() if n > 1]
    if repeated:
        return False, f"repeated line: {repeated[0][:80]!r}"
    opening = reply.body.strip()[:40]
    if len(opening) >= 20 and reply.content.count(opening) > 1:
        return False, f"the opening {opening!r} appears {reply.content.count(opening)} times"
    return True, f"{len(reply.body.strip())} characters, once"


def one_source_per_cited_anchor(reply: Reply) -> tuple[bool, str]:
    """The front end lists exactly one source per passage the answer cites, each named `[n] ...` after its
    marker, each at its own deepest location (a URL or path with `#anchor`, `#L10-L24` or `#page=N`), and
    no source the answer does not cite."""
    cited = reply.cited
    named = [int(m.group(1)) for s in reply.sources if (m := MARK.match(str(s.get("name", ""))))]
    urls = [str(s.get("url", "")) for s in reply.sources]
    if not cited:
        return (not reply.sources), f"no citations, {len(reply.sources)} sources"
    if sorted(named) != sorted(cited) or len(named) != len(reply.sources):
        return False, f"cited {cited}, sources named {named} of {len(reply.sources)}"
    if len(set(urls)) != len(urls):
        return False, f"two sources share a location: {urls}"
    shallow = [u for u in urls if "#" not in u]
    if shallow:
        return False, f"sources without an anchor, lines or page: {shallow}"
    if reply.shown and not re.search(rf"\b{len(cited)} Sources?\b", reply.shown):
        return False, f"the page does not show '{len(cited)} Sources'"
    return True, f"{len(cited)} cited, {len(reply.sources)} sources: {urls}"


def grounding_shown(reply: Reply) -> tuple[bool, str]:
    """An answer that cites nothing says so: it is an abstention, or it carries the not-grounded note (in the
    stored content and on the page)."""
    if reply.cited or reply.abstained:
        return True, "cited" if reply.cited else "abstained"
    in_content = NOT_GROUNDED in reply.content
    on_page = not reply.shown or NOT_GROUNDED in reply.shown
    return in_content and on_page, f"uncited; note in content {in_content}, on the page {on_page}"


CHECKS = {
    "answer_once": answer_once,
    "one_source_per_cited_anchor": one_source_per_cited_anchor,
    "grounding_shown": grounding_shown,
}


def check_all(replies: list[Reply]) -> dict[str, dict]:
    """Each check over every reply: {"passed": all passed, "per_reply": [why, ...]}."""
    out = {}
    for name, check in CHECKS.items():
        results = [check(r) for r in replies]
        out[name] = {
            "passed": bool(replies) and all(ok for ok, _ in results),
            "per_reply": [("ok: " if ok else "FAILED: ") + why for ok, why in results],
        }
    return out
