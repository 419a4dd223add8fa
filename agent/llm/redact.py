"""Secrets never reach a log line or an error message: URL passwords and API keys are masked."""

from __future__ import annotations

import logging
import os
import re
from typing import overload
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
_URL_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/\s:@]*):(?P<password>[^/\s@]*)@")
_KEY_ENV = ("OPENAI_API_KEY", "RAGSIEVE_API_KEY")
_BEARER = re.compile(r"(?i)(bearer\s+|api[_-]?key[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9._\-]{8,}")


@overload
def redact_url(url: str) -> str: ...
@overload
def redact_url(url: None) -> None: ...
def redact_url(url: str | None) -> str | None:
    """`url` with any password in its user-info replaced by ***."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    netloc = f"{parts.username or ''}:{MASK}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def redact(text: str, secrets: tuple[str | None, ...] = ()) -> str:
    """`text` with URL passwords, bearer tokens, the given secrets and the API keys in the environment masked."""
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", str(text))
    text = _BEARER.sub(lambda m: m.group(1) + MASK, text)
    for secret in list(secrets) + [os.environ.get(name) for name in _KEY_ENV]:
        if secret and len(secret) >= 4 and secret != "not-needed":
            text = text.replace(secret, MASK)
    return text


class RedactingFilter(logging.Filter):
    """A logging filter (installed by the CLI on its handlers) that masks secrets in every record."""

    def __init__(self, secrets: tuple[str | None, ...] = ()) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string stays the logging module's problem
            return True
        record.msg, record.args = redact(message, self.secrets), None
        return True
