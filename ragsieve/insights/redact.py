"""Personal data and secrets removed from a question before it is written anywhere.

Applied to every text the question log stores (question, rewritten question,
comment, optional answer): e-mail addresses, phone numbers, bearer/API tokens,
key-like strings (long runs of letters and digits mixing classes, hex and
base64 blobs, `sk-...`/`ghp_...`-style prefixed keys), JWTs, URL credentials
and `password=`-style assignments. Patterns err on the side of removing: a
question about "ab12cd34ef56gh78" loses the string, not its topic.
"""

from __future__ import annotations

import re

_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("[email]", re.compile(r"[\w.+%-]+@[\w-]+(?:\.[\w-]+)+", re.UNICODE)),
    ("[credentials]", re.compile(r"(?<=://)[^\s/@:]+:[^\s/@]+(?=@)")),
    (
        "[secret]",
        re.compile(
            r"(?i)\b(?:password|passwd|pwd|secret|token|api[\s_-]?key|access[\s_-]?key|auth)"
            r"(\s*[:=]\s*|\s+is\s+)[\"']?[^\s\"',;]{4,}"
        ),
    ),
    ("[token]", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}")),
    ("[token]", re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}")),  # JWT
    ("[key]", re.compile(r"\b(?:sk|pk|rk|ghp|gho|ghs|github_pat|xox[abprs]|AKIA|AIza|glpat)[-_][A-Za-z0-9_-]{8,}")),
    ("[key]", re.compile(r"\bAKIA[0-9A-Z]{16}\b")),
    ("[key]", re.compile(r"\b[0-9a-fA-F]{24,}\b")),  # hex digests and keys
    ("[key]", re.compile(r"(?<![\w/])(?=[A-Za-z0-9+/_-]*\d)(?=[A-Za-z0-9+/_-]*[A-Za-z])[A-Za-z0-9+/_-]{20,}={0,2}")),
    ("[phone]", re.compile(r"(?<![\w+])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{1,4}\)[\s.-]?)?\d{2,4}(?:[\s.-]\d{2,4}){1,4}(?!\w)")),
    ("[phone]", re.compile(r"(?<![\w+])\+?\d{8,15}(?!\w)")),
]
_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[./-]\d{1,2}[./-]\d{2,4}")
PHONE_MIN_DIGITS = 7


def redact(text: str) -> str:
    """`text` with every e-mail address, phone number, token and key-like string replaced by a label."""
    for label, pattern in _RULES:
        if label == "[phone]":
            text = pattern.sub(_phone, text)
        elif label == "[secret]":
            text = pattern.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + m.group(1) + "[secret]", text)
        else:
            text = pattern.sub(label, text)
    return text


def _phone(match: re.Match[str]) -> str:
    """A digit group is a phone number when it has at least PHONE_MIN_DIGITS digits and is not a date."""
    found = match.group(0)
    if _DATE.fullmatch(found.strip()) or sum(c.isdigit() for c in found) < PHONE_MIN_DIGITS:
        return found
    return "[phone]"
