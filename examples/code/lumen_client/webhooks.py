"""Verify Lumen webhook signatures: `Lumen-Signature: v1=<hex HMAC-SHA256 of "{timestamp}.{body}">`."""

from __future__ import annotations

import hashlib
import hmac
import time

TOLERANCE_SECONDS = 300


class SignatureError(Exception):
    """The delivery is not authentic or is too old to accept."""


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The `v1=` signature Lumen sends for `body` signed at `timestamp`."""
    message = str(timestamp).encode("ascii") + b"." + body
    return "v1=" + hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def verify_signature(
    secret: str,
    body: bytes,
    signature_header: str,
    timestamp_header: str,
    *,
    now: float | None = None,
    tolerance: int = TOLERANCE_SECONDS,
) -> None:
    """Raise SignatureError unless one `v1=` signature in the header matches the raw body.

    During a signing-secret rotation the header holds two comma-separated
    signatures; either may match. Deliveries older or newer than `tolerance`
    seconds are refused to stop replays.
    """
    try:
        timestamp = int(timestamp_header)
    except (TypeError, ValueError):
        raise SignatureError(f"bad Lumen-Timestamp header {timestamp_header!r}") from None
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise SignatureError(f"timestamp {timestamp} is outside the {tolerance}s tolerance")
    expected = sign(secret, timestamp, body)
    candidates = [part.strip() for part in (signature_header or "").split(",")]
    if not any(hmac.compare_digest(expected, c) for c in candidates if c.startswith("v1=")):
        raise SignatureError("no matching v1 signature")
