"""Rotate a workspace API key and report when the old secret stops working."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from .client import LumenClient

DEFAULT_GRACE = timedelta(hours=24)
MAX_GRACE = timedelta(hours=72)


@dataclass(frozen=True)
class RotatedKey:
    key_id: str
    new_secret: str
    old_secret_expires_at: datetime

    def old_secret_valid(self, at: datetime | None = None) -> bool:
        """Whether the previous secret is still accepted at `at` (now by default)."""
        return (at or datetime.now(timezone.utc)) < self.old_secret_expires_at


def _hours(grace: timedelta) -> str:
    if grace < timedelta(0) or grace > MAX_GRACE:
        raise ValueError(f"grace period must be between 0h and 72h, got {grace}")
    return f"{int(grace.total_seconds() // 3600)}h"


def rotate_key(client: LumenClient, workspace: str, key_id: str, grace: timedelta = DEFAULT_GRACE) -> RotatedKey:
    """Call `POST /v1/workspaces/{workspace}/keys/{key_id}/rotate`.

    The old secret stays valid until `old_secret_expires_at` (24 hours by
    default) and is then revoked; use `grace=timedelta(0)` after a leak.
    """
    reply = client.request("POST", f"/v1/workspaces/{workspace}/keys/{key_id}/rotate", {"grace_period": _hours(grace)})
    expires = datetime.fromisoformat(reply["old_secret_expires_at"].replace("Z", "+00:00"))
    return RotatedKey(key_id=reply["key_id"], new_secret=reply["secret"], old_secret_expires_at=expires)
